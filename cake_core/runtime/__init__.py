"""NVRTC compilation, resource reports, launch plans and isolated GPU workers."""
