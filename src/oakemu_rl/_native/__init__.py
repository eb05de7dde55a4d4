"""Optional C kernels. Import failures fall back to the numpy implementations."""
