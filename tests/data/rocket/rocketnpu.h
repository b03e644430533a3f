/* The stand-in librocketnpu's interface (rocket-userspace's driver library, GPL-3.0-or-later). */
#ifndef ROCKETNPU_H
#define ROCKETNPU_H

#define ROCKET_NODE "/dev/accel/accel0"

int rocketnpu_version(void);

#endif
