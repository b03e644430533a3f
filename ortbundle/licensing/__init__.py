"""Who licensed each shipped file and whether the policy allows it: attribution, NOTICE, SPDX
expressions, waivers and the audit gate."""
