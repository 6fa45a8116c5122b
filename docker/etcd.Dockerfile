# etcd for the image tests (scripts/image-test): Debian's `etcd-server` package, the same etcd
# the rest of the tests run, on the same base as the Meridian images, as etcd's own user.
ARG BASE_IMAGE=debian:bookworm-slim
FROM ${BASE_IMAGE}
RUN apt-get update \
 && apt-get install -y --no-install-recommends etcd-server \
 && rm -rf /var/lib/apt/lists/* \
 && install -d -o etcd -g etcd -m 0700 /var/lib/etcd/data
USER etcd
VOLUME /var/lib/etcd/data
EXPOSE 2379/tcp 2380/tcp
ENTRYPOINT ["/usr/bin/etcd"]
