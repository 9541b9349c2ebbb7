"""MLPerf Inference harness (NVIDIA closed-division shape, open implementation)."""
