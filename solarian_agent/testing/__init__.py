"""Documented test fakes that ship with the package (toy harness, fake model server, ...)."""
