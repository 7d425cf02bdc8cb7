//! [`Cluster`]: gateways that share one Redis session store and know which of them holds
//! each live conversation, so that a request reaches the CLI that runs its conversation
//! whichever gateway a load balancer gave it to.
//!
//! Each gateway is a node with a name and an address the others reach it at
//! (`--advertise`). In the store's Redis server:
//!
//! | key | what | expires |
//! |---|---|---|
//! | `ccwire:{cluster}:node:<name>` | the node's address | after [`LEASE`] unless renewed (every [`RENEW`]) |
//! | `ccwire:{cluster}:names` | the names of the nodes (a set; a name whose lease lapsed is dropped when seen) | never |
//! | `ccwire:{cluster}:route:<key>` | the node that claims a route key | with the store's time-to-live |
//! | `ccwire:{cluster}:secret` | what a forwarded request carries to be served where it arrives | never |
//!
//! A route key is what [`Gateway::route_key`](ccwire_core::gateway::Gateway::route_key)
//! computes from a request (a digest; no tenant's key is written): the engine claims the key
//! of each history its live CLIs continue and releases it when they no longer do. A request
//! whose key a live other node claims is forwarded there. One whose claimant is gone (its
//! lease lapsed: killed, paused, cut off) or that nobody claims is claimed, in the same step,
//! by the node it arrived at, which serves it (resumed from the store): a second request
//! for it, on any node, is forwarded there, and a node that comes back after its lease
//! lapsed finds its conversations claimed by others. Such a node closes the CLIs it still
//! runs that wait for nothing ([`Cluster::renew`] says when), and the store's fencing tokens
//! ([`crate::store::RedisStore`]) refuse any write of a CLI whose conversation another node
//! has resumed since, which closes it too: no conversation goes on in two CLIs.

use std::io;
use std::sync::LazyLock;
use std::time::Duration;

use redis::aio::ConnectionManager;
use redis::Script;

use crate::store::RedisStore;

/// How long a node counts as alive after its last renewal.
pub const LEASE: Duration = Duration::from_secs(10);

/// How often a node renews its lease.
pub const RENEW: Duration = Duration::from_secs(3);

/// The name and address of the live node other than `ARGV[1]` that claims `KEYS[1]`; else,
/// when `ARGV[3]` is not 0, `ARGV[1]` claims it (for `ARGV[3]` seconds unless it claimed it
/// already: then nil), and `{ARGV[1], ''}`. ARGV: this node's name, the node keys' prefix,
/// the claim's time-to-live.
static OWNER: LazyLock<Script> = LazyLock::new(|| Script::new(OWNER_LUA));
const OWNER_LUA: &str = r"
local node = redis.call('GET', KEYS[1])
if node == ARGV[1] then return false end
if node then
  local addr = redis.call('GET', ARGV[2] .. node)
  if addr then return {node, addr} end
end
if ARGV[3] ~= '0' then
  redis.call('SET', KEYS[1], ARGV[1], 'EX', ARGV[3])
  return {ARGV[1], ''}
end
return false
";

/// The live nodes other than `ARGV[1]`, `{name, address}` each; drops the names whose lease
/// lapsed. KEYS: the set of names. ARGV: this node's name, the node keys' prefix.
static PEERS: LazyLock<Script> = LazyLock::new(|| Script::new(PEERS_LUA));
const PEERS_LUA: &str = r"
local peers = {}
for _, name in ipairs(redis.call('SMEMBERS', KEYS[1])) do
  local addr = redis.call('GET', ARGV[2] .. name)
  if not addr then
    redis.call('SREM', KEYS[1], name)
  elseif name ~= ARGV[1] then
    table.insert(peers, {name, addr})
  end
end
return peers
";

/// How long a node keeps a key it claimed by serving a request nobody else held: until its
/// engine claims the history the request makes, and long enough that a node back from a
/// lapsed lease finds the conversation taken.
const TAKEN_TTL: Duration = Duration::from_secs(3600);

/// Deletes a route key if `ARGV[1]` still claims it.
static RELEASE: LazyLock<Script> = LazyLock::new(|| Script::new(RELEASE_LUA));
const RELEASE_LUA: &str = r"
if redis.call('GET', KEYS[1]) == ARGV[1] then redis.call('DEL', KEYS[1]) end
return 1
";

const NODE_PREFIX: &str = "ccwire:{cluster}:node:";
const ROUTE_PREFIX: &str = "ccwire:{cluster}:route:";
const SECRET: &str = "ccwire:{cluster}:secret";
const NAMES: &str = "ccwire:{cluster}:names";

/// This gateway as a node of a cluster (see the module's docs).
#[derive(Clone)]
pub struct Cluster {
    redis: ConnectionManager,
    shown: String,
    node: String,
    advertise: String,
    /// The address was given without a port: the one the gateway listens on goes with it.
    needs_port: bool,
    ttl: Duration,
    /// The cluster's secret, once [`enter`](Self::enter)ed.
    secret: String,
    /// When the lease was last renewed (`None`: never).
    renewed: std::sync::Arc<std::sync::Mutex<Option<std::time::Instant>>>,
}

impl std::fmt::Debug for Cluster {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Cluster")
            .field("store", &self.shown)
            .field("node", &self.node)
            .field("advertise", &self.advertise)
            .finish()
    }
}

/// Where a request belongs ([`Cluster::owner`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Claimed {
    /// With another live node.
    Elsewhere(Owner),
    /// Here: this node claims it; `taken` when it took the claim just now (nobody held it, or
    /// its holder's lease had lapsed), so what it knew of the key's resources may be stale.
    Here {
        /// Taken by this lookup.
        taken: bool,
    },
}

/// A node of the cluster.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Owner {
    /// The node's name.
    pub node: String,
    /// Its base URL (`http://host:port`).
    pub url: String,
}

impl Cluster {
    /// This gateway as node `node` (a fresh random name when `None`) of the cluster of the
    /// gateways that share `store`, which the others reach at `advertise`: `host:port`, a
    /// `host` alone (the port the gateway listens on goes with it, see
    /// [`listening_on`](Self::listening_on)), or an `http(s)://` base URL taken as it is.
    /// It is a member once it has its lease ([`renew`](Self::renew), which the gateway does at
    /// its start and then every [`RENEW`]).
    ///
    /// # Errors
    /// A name that is not ASCII letters, digits, `-` and `_` (at most 64), an address that
    /// is no `http(s)://` base URL.
    pub fn new(store: &RedisStore, node: Option<&str>, advertise: &str) -> io::Result<Cluster> {
        let node = match node {
            Some(name) => {
                let ok = !name.is_empty()
                    && name.len() <= 64
                    && name
                        .bytes()
                        .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_');
                if !ok {
                    return Err(io::Error::new(
                        io::ErrorKind::InvalidInput,
                        format!("a node's name is ASCII letters, digits, '-' and '_': {name:?}"),
                    ));
                }
                name.to_owned()
            }
            None => {
                let mut bytes = [0u8; 8];
                getrandom::getrandom(&mut bytes).map_err(|e| io::Error::other(e.to_string()))?;
                bytes.iter().map(|b| format!("{b:02x}")).collect()
            }
        };
        let (advertise, needs_port) = advertise_url(advertise)?;
        Ok(Cluster {
            redis: store.connection(),
            shown: store.url().to_owned(),
            node,
            advertise,
            needs_port,
            ttl: store.ttl(),
            secret: String::new(),
            renewed: std::sync::Arc::default(),
        })
    }

    /// Becomes a member: learns the cluster's secret (the first node makes it up) and takes
    /// its lease.
    ///
    /// # Errors
    /// The server's.
    pub async fn enter(&mut self) -> io::Result<()> {
        let mut bytes = [0u8; 32];
        getrandom::getrandom(&mut bytes).map_err(|e| io::Error::other(e.to_string()))?;
        let made: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
        let mut redis = self.redis.clone();
        let (secret,): (String,) = redis::pipe()
            .cmd("SET")
            .arg(SECRET)
            .arg(made)
            .arg("NX")
            .ignore()
            .cmd("GET")
            .arg(SECRET)
            .query_async(&mut redis)
            .await
            .map_err(|e| self.failed(e))?;
        self.secret = secret;
        self.renew().await.map(drop)
    }

    /// Whether a request's forwarding header shows it was forwarded by a node of this
    /// cluster (so it is served where it arrives).
    pub fn forwarded(&self, header: &[u8]) -> bool {
        use subtle::ConstantTimeEq;
        !self.secret.is_empty() && bool::from(self.secret.as_bytes().ct_eq(header))
    }

    /// What a request this node forwards carries ([`forwarded`](Self::forwarded)).
    pub fn forwarding_header(&self) -> &str {
        &self.secret
    }

    /// The gateway listens on `port`: an address advertised without a port gets it.
    pub fn listening_on(&mut self, port: u16) {
        if std::mem::take(&mut self.needs_port) {
            self.advertise = format!("{}:{port}", self.advertise);
        }
    }

    /// This node's name.
    pub fn node(&self) -> &str {
        &self.node
    }

    /// The base URL the other nodes reach this one at.
    pub fn advertise(&self) -> &str {
        &self.advertise
    }

    fn failed(&self, error: redis::RedisError) -> io::Error {
        io::Error::other(format!("the cluster registry at {}: {error}", self.shown))
    }

    /// Renews this node's lease for another [`LEASE`]; whether it had lapsed since the last
    /// renewal (the node was paused or cut off from the server that long: other nodes may
    /// have taken its conversations over).
    ///
    /// # Errors
    /// The server's.
    pub async fn renew(&self) -> io::Result<bool> {
        let mut redis = self.redis.clone();
        let asked = std::time::Instant::now();
        redis::pipe()
            .cmd("SET")
            .arg(format!("{NODE_PREFIX}{}", self.node))
            .arg(&self.advertise)
            .arg("PX")
            .arg(LEASE.as_millis() as u64)
            .ignore()
            .cmd("SADD")
            .arg(NAMES)
            .arg(&self.node)
            .ignore()
            .query_async::<()>(&mut redis)
            .await
            .map_err(|e| self.failed(e))?;
        let mut renewed = self.renewed.lock().expect("lease lock");
        let lapsed = renewed.is_some_and(|at| asked.duration_since(at) >= LEASE);
        *renewed = Some(asked);
        Ok(lapsed)
    }

    /// Gives up this node's lease at once (a gateway that stops): the others serve its
    /// conversations from the store from now on.
    ///
    /// # Errors
    /// The server's.
    pub async fn leave(&self) -> io::Result<()> {
        let mut redis = self.redis.clone();
        redis::pipe()
            .cmd("DEL")
            .arg(format!("{NODE_PREFIX}{}", self.node))
            .ignore()
            .cmd("SREM")
            .arg(NAMES)
            .arg(&self.node)
            .ignore()
            .query_async::<()>(&mut redis)
            .await
            .map_err(|e| self.failed(e))
    }

    /// Requests with route key `key` belong to this node now.
    ///
    /// # Errors
    /// The server's.
    pub async fn claim(&self, key: &str) -> io::Result<()> {
        let mut redis = self.redis.clone();
        redis::cmd("SET")
            .arg(format!("{ROUTE_PREFIX}{key}"))
            .arg(&self.node)
            .arg("EX")
            .arg(self.ttl.as_secs().max(1))
            .query_async::<()>(&mut redis)
            .await
            .map_err(|e| self.failed(e))
    }

    /// They no longer do (unless another node has claimed them since).
    ///
    /// # Errors
    /// The server's.
    pub async fn release(&self, key: &str) -> io::Result<()> {
        let mut redis = self.redis.clone();
        RELEASE
            .key(format!("{ROUTE_PREFIX}{key}"))
            .arg(&self.node)
            .invoke_async::<i64>(&mut redis)
            .await
            .map(drop)
            .map_err(|e| self.failed(e))
    }

    /// The live node other than this one that claims route key `key`, if any; else, when
    /// `take`, this node claims it, in the same step, to serve its request.
    ///
    /// # Errors
    /// The server's.
    pub async fn owner(&self, key: &str, take: bool) -> io::Result<Claimed> {
        let mut redis = self.redis.clone();
        let ttl = match take {
            true => TAKEN_TTL.min(self.ttl).as_secs().max(1),
            false => 0,
        };
        let found: Option<(String, String)> = OWNER
            .key(format!("{ROUTE_PREFIX}{key}"))
            .arg(&self.node)
            .arg(NODE_PREFIX)
            .arg(ttl)
            .invoke_async(&mut redis)
            .await
            .map_err(|e| self.failed(e))?;
        Ok(match found {
            Some((node, _)) if node == self.node => Claimed::Here { taken: true },
            Some((node, url)) => Claimed::Elsewhere(Owner { node, url }),
            None => Claimed::Here { taken: false },
        })
    }

    /// The other live nodes, by name.
    ///
    /// # Errors
    /// The server's.
    pub async fn peers(&self) -> io::Result<Vec<Owner>> {
        let mut redis = self.redis.clone();
        let mut peers: Vec<(String, String)> = PEERS
            .key(NAMES)
            .arg(&self.node)
            .arg(NODE_PREFIX)
            .invoke_async(&mut redis)
            .await
            .map_err(|e| self.failed(e))?;
        peers.sort();
        Ok(peers
            .into_iter()
            .map(|(node, url)| Owner { node, url })
            .collect())
    }
}

/// `advertise` as a base URL, and whether it lacks the port: `host:port` and `host` get
/// `http://`; a URL keeps its scheme, which must be `http` or `https`, and loses a trailing
/// `/`.
fn advertise_url(advertise: &str) -> io::Result<(String, bool)> {
    let (url, needs_port) = if advertise.contains("://") {
        (advertise.to_owned(), false)
    } else {
        let port = advertise
            .rsplit_once(':')
            .is_some_and(|(_, port)| !port.is_empty() && port.bytes().all(|b| b.is_ascii_digit()));
        (format!("http://{advertise}"), !port)
    };
    let parsed = reqwest::Url::parse(&url).map_err(|e| {
        io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("not an address to advertise: {advertise:?}: {e}"),
        )
    })?;
    let fits = matches!(parsed.scheme(), "http" | "https")
        && parsed.host().is_some()
        && parsed.path() == "/"
        && parsed.query().is_none();
    if !fits {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("the address to advertise is host:port or an http(s) base URL: {advertise:?}"),
        ));
    }
    Ok((url.trim_end_matches('/').to_owned(), needs_port))
}

#[cfg(test)]
mod tests {
    use super::advertise_url;

    #[test]
    fn an_advertised_address_is_a_base_url() {
        let url = |a: &str| advertise_url(a).unwrap();
        assert_eq!(url("10.0.0.5:8080"), ("http://10.0.0.5:8080".into(), false));
        assert_eq!(url("10.0.0.5"), ("http://10.0.0.5".into(), true));
        assert_eq!(url("[::1]:80"), ("http://[::1]:80".into(), false));
        assert_eq!(url("[::1]"), ("http://[::1]".into(), true));
        assert_eq!(
            url("https://gw1.internal/"),
            ("https://gw1.internal".into(), false)
        );
        assert!(advertise_url("ftp://gw1").is_err());
        assert!(advertise_url("http://gw1/api").is_err());
        assert!(advertise_url("not an address").is_err());
    }
}
