"""Story generators (Hi-ToM and ToMi style) whose labels come from the belief oracle."""
