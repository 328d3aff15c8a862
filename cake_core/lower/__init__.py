"""Cake IR -> standalone CUDA C++: the kernel structure here, each operation by its primitive."""
