"""What ships to users' machines beside the runtimes: the dependency-free runtime loader."""
