# syntax=docker/dockerfile:1
# Hoist's image: built with Swift, run on a slim Debian with only the runtime libraries (the
# Debian package's Depends), as a non-root user. Build from the repository's root:
#   docker build -t hoist .
#   docker run --rm -v "$PWD/jobs:/jobs:ro" hoist run /jobs/quickstart.yaml
# deploy/kubernetes/ runs it (push it to your registry and set the image there).

FROM swift:6.3-bookworm AS build
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
      pkg-config liblua5.4-dev libcurl4-openssl-dev libyaml-dev libsqlite3-dev zlib1g-dev linux-libc-dev \
      dpkg-dev fakeroot binutils git \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY . .
# The same package scripts/package makes anywhere: release binary, man page, completions, plugins.
RUN scripts/package

FROM debian:bookworm-slim
COPY --from=build /src/dist/ /tmp/dist/
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends ca-certificates /tmp/dist/hoist_*.deb \
 && rm -rf /var/lib/apt/lists/* /tmp/dist \
 && useradd --system --uid 10001 --create-home --home-dir /home/hoist --shell /usr/sbin/nologin hoist
USER hoist
WORKDIR /home/hoist
ENTRYPOINT ["hoist"]
CMD ["--help"]
