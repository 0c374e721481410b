"""REST API of the hardware model: one viewset per model, builds, presets, the cluster
summary and the geometry the 3D dashboard draws (``urls.router``)."""
