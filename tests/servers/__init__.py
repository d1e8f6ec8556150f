"""Protocol-faithful test servers for the Google APIs, served on loopback."""
