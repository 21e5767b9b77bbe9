"""E-mail suppressions: addresses that must not get e-mail (bounces, complaints), and lifting one."""
