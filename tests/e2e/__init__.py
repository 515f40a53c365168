"""Whole-system tests; a package so that its cluster fixtures end with its tests."""
