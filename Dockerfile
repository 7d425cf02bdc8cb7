# ccwire's container image: `ccwire serve` with the Claude Code CLI release ccwire is tested
# against and bubblewrap, run as a non-root user, its state in the volume /var/lib/ccwire.
# docs/INSTALL.md#a-container-image says how to build and run it.
#
#   docker build -t ccwire --build-arg CCWIRE_COMMIT=$(git rev-parse --short=12 HEAD) .

ARG RUST_VERSION=1.95
ARG NODE_VERSION=22

FROM rust:${RUST_VERSION}-slim-bookworm AS build
WORKDIR /src
COPY . .
# What `ccwire --version` names as the commit (the build context has no .git).
ARG CCWIRE_COMMIT=unknown
RUN CCWIRE_COMMIT="${CCWIRE_COMMIT}" cargo build --release --locked -p ccwire-host --bin ccwire

FROM node:${NODE_VERSION}-bookworm-slim
# The CLI release of scripts/install-cli.sh (a test keeps the two the same).
ARG CLAUDE_CODE_VERSION=2.1.332
# bubblewrap: the OS sandbox of each CLI; git and ripgrep: what the CLI's tools use.
# hadolint ignore=DL3008
RUN apt-get update \
    && apt-get install -y --no-install-recommends bubblewrap ca-certificates git ripgrep \
    && rm -rf /var/lib/apt/lists/*
RUN npm install -g --no-audit --no-fund "@anthropic-ai/claude-code@${CLAUDE_CODE_VERSION}" \
    && npm cache clean --force
COPY --from=build /src/target/release/ccwire /usr/local/bin/ccwire
COPY docker/entrypoint.sh /usr/local/bin/ccwire-entrypoint
RUN useradd --create-home --uid 10001 --shell /usr/sbin/nologin ccwire \
    && mkdir -p /var/lib/ccwire \
    && chown ccwire:ccwire /var/lib/ccwire
# By number, so that a runtime that refuses root (runAsNonRoot) can tell.
USER 10001:10001
# Each tenant's CLI home, work and temporary directories, and the session store.
ENV XDG_STATE_HOME=/var/lib
VOLUME ["/var/lib/ccwire"]
EXPOSE 8787
ENTRYPOINT ["ccwire-entrypoint"]
CMD ["serve"]
