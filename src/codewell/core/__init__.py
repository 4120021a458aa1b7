"""Types, errors and settings shared by every capability; imports nothing from them."""
