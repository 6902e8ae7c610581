"""Patched container images: the Dockerfile, its build context, image references, the builders."""
