"""The security benchmark's machinery (bench/security.py): attack cases, the scene each runs in, canaries."""
