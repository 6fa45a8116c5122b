# The build stage's base where no registry can supply `rust:1-bookworm`: the Debian base made by
# `scripts/images`, a C toolchain for the crates that build C (ring, jemalloc), and the Rust
# toolchain `scripts/images` copies in from the machine's own rustup (context: toolchain/), and
# the CA bundle the machine's own cargo trusts (context: ca-bundle.crt; where a proxy re-signs
# crates.io's TLS, cargo in the build needs the same). Never a base of a runtime image.
ARG BASE_IMAGE=debian:bookworm-slim
FROM ${BASE_IMAGE}
RUN apt-get update \
 && apt-get install -y --no-install-recommends ca-certificates gcc g++ libc6-dev make \
 && rm -rf /var/lib/apt/lists/*
COPY ca-bundle.crt /usr/local/share/meridian-build/ca-bundle.crt
COPY toolchain/ /usr/local/rust/
ENV PATH=/usr/local/rust/bin:/usr/local/cargo/bin:$PATH \
    CARGO_HOME=/usr/local/cargo \
    CARGO_HTTP_CAINFO=/usr/local/share/meridian-build/ca-bundle.crt
