//! The cluster's transport: this node's lease, requests forwarded to the node that runs their
//! conversation (streamed through), and the console's answers gathered from every node.

use super::*;

/// Renews this node's lease every [`RENEW`](crate::cluster::RENEW) until aborted; says so
/// when it cannot, and when it can again. Once the lease had lapsed, the CLIs that wait for
/// nothing are closed: other nodes may have resumed their conversations meanwhile (those
/// that did not are resumed here, exactly, on their next request).
pub(super) async fn heartbeat(app: std::sync::Weak<App>, cluster: Cluster) {
    let mut tick = tokio::time::interval(crate::cluster::RENEW);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut failing = false;
    loop {
        tick.tick().await;
        match cluster.renew().await {
            Ok(lapsed) => {
                if std::mem::take(&mut failing) {
                    tracing::info!(
                        node = cluster.node(),
                        "this gateway's lease in the cluster is renewed again"
                    );
                }
                if lapsed {
                    let Some(app) = app.upgrade() else {
                        return;
                    };
                    let closed = app.input(|gateway, now| gateway.hibernate_idle(now, usize::MAX));
                    tracing::warn!(node = cluster.node(), closed, "this gateway's lease in the cluster had lapsed; its idle CLIs are closed, as other gateways may have taken their conversations over");
                }
            }
            Err(error) if !failing => {
                failing = true;
                tracing::warn!(%error, node = cluster.node(), "cannot renew this gateway's lease in the cluster; once it lapses, other gateways resume its conversations");
            }
            Err(_) => {}
        }
    }
}

/// Sends a request to the node of the cluster that must serve it, as the gateway decides
/// from the registry's answer ([`Gateway::placed`](ccwire_core::gateway::Gateway::placed)):
/// the node that holds its key, or, while this one drains, any other. `None`: it is served
/// here.
pub(super) async fn to_cluster(
    app: &Arc<App>,
    cluster: &Cluster,
    parts: &axum::http::request::Parts,
    api: ccwire_core::api::Api,
    placement: &Placement,
    tenant: &str,
    body: &Bytes,
) -> Option<Response> {
    let (holder, owner) = match &placement.key {
        RouteKey::Conversation(key) => match cluster.owner(key, placement.claim).await {
            Ok(Claimed::Elsewhere(owner)) => (Holder::Other, Some(owner)),
            Ok(Claimed::Here { taken }) => (Holder::Here { taken }, None),
            Err(error) => {
                tracing::warn!(%error, "cannot look a request up in the cluster; serving it here");
                (Holder::Unknown, None)
            }
        },
        RouteKey::New => (Holder::Here { taken: false }, None),
    };
    let placed = app.input(|gateway, _| gateway.placed(placement, tenant, holder));
    let owner = match (placed, owner) {
        (Placed::ToHolder, Some(owner)) => owner,
        (Placed::ToAnyOther, _) => {
            let peers = cluster.peers().await.unwrap_or_default();
            let turn = app.next_request.fetch_add(1, Ordering::Relaxed) as usize;
            peers.get(turn % peers.len().max(1))?.clone()
        }
        _ => return None,
    };
    match forward(app, cluster, &owner, parts, body.clone()).await {
        Ok(response) => Some(response),
        Err(error) if error.is_connect() => {
            tracing::info!(node = owner.node, %error, "the gateway a request belongs to is unreachable; serving it here");
            app.input(|gateway, _| gateway.holder_unreachable(placement, tenant));
            None
        }
        Err(error) => {
            tracing::warn!(node = owner.node, %error, "a forwarded request failed");
            let message = format!(
                "the gateway that holds this conversation ({}) did not answer",
                owner.node
            );
            let error = ApiError::new(ApiErrorKind::Api, message);
            Some(response(
                502,
                vec![("content-type".into(), "application/json".into())],
                error.body(api).to_string().into(),
            ))
        }
    }
}

/// How long a node waits for another's part of a cluster-wide answer.
pub(super) const PEER_TIMEOUT: Duration = Duration::from_secs(2);

/// A `method` request to `path` on `peer` as the client asked it of this node (its own headers, so the
/// peer authenticates it again), marked as forwarded.
pub(super) fn to_peer(
    app: &App,
    cluster: &Cluster,
    peer: &Owner,
    method: axum::http::Method,
    path: &str,
    asked: &axum::http::HeaderMap,
) -> reqwest::RequestBuilder {
    let mut request = app
        .forwarder
        .request(method, format!("{}{path}", peer.url))
        .header(FORWARDED_BY, cluster.forwarding_header());
    for (name, value) in asked {
        if !hop_by_hop(name.as_str()) && name.as_str() != FORWARDED_BY {
            request = request.header(name, value);
        }
    }
    request
}

/// `GET path` (with its query) of the whole cluster (`/v1/approvals`, `/v1/conversations`,
/// `/v1/stats`): this node's answer (`local`) with every other live node's, merged
/// ([`merge_node_answers`](ccwire_core::gateway::merge_node_answers)); a node that does not
/// answer in time is left out (and logged).
pub(super) async fn cluster_list(
    app: &App,
    cluster: &Cluster,
    asked: &axum::http::HeaderMap,
    path: &str,
    local: Vec<u8>,
) -> Vec<u8> {
    let Ok(mine) = serde_json::from_slice::<serde_json::Value>(&local) else {
        return local;
    };
    let peers = match cluster.peers().await {
        Ok(peers) => peers,
        Err(error) => {
            tracing::warn!(%error, path, "cannot list the cluster's nodes; this one's answer only");
            return local;
        }
    };
    let answers = futures::future::join_all(peers.iter().map(|peer| async move {
        let answer = to_peer(app, cluster, peer, axum::http::Method::GET, path, asked)
            .timeout(PEER_TIMEOUT)
            .send()
            .await
            .and_then(reqwest::Response::error_for_status);
        let answer = match answer {
            Ok(answer) => answer.json::<serde_json::Value>().await,
            Err(error) => Err(error),
        };
        answer
            .map_err(|error| tracing::warn!(node = peer.node, %error, path, "a node's answer is left out"))
            .ok()
    }))
    .await;
    let theirs: Vec<serde_json::Value> = answers.into_iter().flatten().collect();
    let route = path.split_once('?').map_or(path, |(route, _)| route);
    ccwire_core::gateway::merge_node_answers(route, mine, theirs)
        .to_string()
        .into_bytes()
}

/// `GET /v1/conversations/{id}/events` of a conversation no CLI of this node runs: the stream
/// of the node whose CLI runs it (asked with `live=only`), if one does.
pub(super) async fn live_elsewhere(
    app: &App,
    cluster: &Cluster,
    parts: &axum::http::request::Parts,
) -> Option<Response> {
    let peers = cluster.peers().await.ok()?;
    let query = parts.uri.query().map_or(String::new(), |q| format!("{q}&"));
    let path = format!("{}?{query}live=only", parts.uri.path());
    for peer in &peers {
        let request = to_peer(
            app,
            cluster,
            peer,
            axum::http::Method::GET,
            &path,
            &parts.headers,
        );
        let Ok(Ok(answer)) = tokio::time::timeout(PEER_TIMEOUT, request.send()).await else {
            continue;
        };
        if answer.status() != 200 {
            continue;
        }
        let headers = answer.headers().clone();
        let mut response = Response::new(Body::from_stream(answer.bytes_stream()));
        for (name, value) in &headers {
            if !hop_by_hop(name.as_str()) {
                response.headers_mut().append(name, value.clone());
            }
        }
        return Some(response);
    }
    None
}

/// `GET /v1/approvals/events` of the whole cluster: this node's stream (`local`), and every
/// other live node's, whole events interleaved, the nodes looked up again every few seconds
/// (a node that joins is added; one whose stream ends is connected again while it lives).
/// It ends with this node's stream; a client that goes away closes them all.
pub(super) fn cluster_events(
    app: Arc<App>,
    cluster: Cluster,
    asked: axum::http::HeaderMap,
    local: impl futures::Stream<Item = Result<Bytes, Infallible>> + Send + 'static,
) -> impl futures::Stream<Item = Result<Bytes, Infallible>> + Send + 'static {
    let (frames, out) = mpsc::channel::<Bytes>(64);
    let (ended, end) = tokio::sync::watch::channel(false);
    let to_client = frames.clone();
    tokio::spawn(async move {
        let mut local = std::pin::pin!(local);
        loop {
            tokio::select! {
                item = local.next() => {
                    let Some(Ok(bytes)) = item else { break };
                    if to_client.send(bytes).await.is_err() {
                        break;
                    }
                }
                // The client went away: so does this node's stream, now.
                () = to_client.closed() => break,
            }
        }
        let _ = ended.send(true);
    });
    tokio::spawn(async move {
        let connected = Arc::new(Mutex::new(std::collections::HashSet::<String>::new()));
        let mut tick = tokio::time::interval(crate::cluster::RENEW);
        let mut end = end;
        loop {
            tokio::select! {
                _ = tick.tick() => {}
                _ = end.changed() => return,
            }
            if frames.is_closed() {
                return;
            }
            let Ok(peers) = cluster.peers().await else {
                continue;
            };
            for peer in peers {
                if !connected
                    .lock()
                    .expect("peers lock")
                    .insert(peer.node.clone())
                {
                    continue;
                }
                let request = to_peer(
                    &app,
                    &cluster,
                    &peer,
                    axum::http::Method::GET,
                    "/v1/approvals/events",
                    &asked,
                );
                let (frames, connected, mut end) = (frames.clone(), connected.clone(), end.clone());
                tokio::spawn(async move {
                    let relay = async {
                        let Ok(answer) = request
                            .send()
                            .await
                            .and_then(reqwest::Response::error_for_status)
                        else {
                            return;
                        };
                        let mut stream = answer.bytes_stream();
                        let mut partial = Vec::new();
                        while let Some(Ok(bytes)) = stream.next().await {
                            partial.extend_from_slice(&bytes);
                            // Whole events only, so no two nodes' events interleave.
                            while let Some(at) = partial.windows(2).position(|w| w == b"\n\n") {
                                let frame: Vec<u8> = partial.drain(..at + 2).collect();
                                if frames.send(Bytes::from(frame)).await.is_err() {
                                    return;
                                }
                            }
                        }
                    };
                    tokio::select! {
                        () = relay => {}
                        _ = end.changed() => {}
                    }
                    connected.lock().expect("peers lock").remove(&peer.node);
                });
            }
        }
    });
    futures::stream::unfold(out, |mut out| async move {
        out.recv().await.map(|bytes| (Ok(bytes), out))
    })
}

/// The header a forwarded request carries: the cluster's secret
/// ([`Cluster::forwarded`]). A gateway serves such a request itself, whatever the registry
/// says (no request goes round in circles); a client cannot make one.
pub(super) const FORWARDED_BY: &str = "x-ccwire-forwarded-by";

/// The header that names the node of a cluster that served a response.
pub(super) const NODE_HEADER: &str = "x-ccwire-node";

/// Headers that belong to one connection, not to the request or response it carries.
pub(super) fn hop_by_hop(name: &str) -> bool {
    matches!(
        name,
        "connection"
            | "keep-alive"
            | "proxy-authenticate"
            | "proxy-authorization"
            | "proxy-connection"
            | "te"
            | "trailer"
            | "transfer-encoding"
            | "upgrade"
            | "host"
            | "content-length"
    )
}

/// Sends a request to the node that runs its conversation and relays its response as it
/// comes (a stream stays a stream; a client that goes away closes the forwarded request, so
/// the owner sees it go away too).
///
/// # Errors
/// The node's connection's: when [`is_connect`](reqwest::Error::is_connect), nothing was sent.
pub(super) async fn forward(
    app: &App,
    cluster: &Cluster,
    owner: &Owner,
    parts: &axum::http::request::Parts,
    body: Bytes,
) -> Result<Response, reqwest::Error> {
    let path = parts
        .uri
        .path_and_query()
        .map_or(parts.uri.path(), |p| p.as_str());
    let request = to_peer(
        app,
        cluster,
        owner,
        parts.method.clone(),
        path,
        &parts.headers,
    );
    let answer = request.body(body).send().await?;
    tracing::debug!(node = owner.node, path, "forwarded a request");
    let status = answer.status();
    let headers = answer.headers().clone();
    let mut response = Response::new(Body::from_stream(answer.bytes_stream()));
    *response.status_mut() = status;
    for (name, value) in &headers {
        if !hop_by_hop(name.as_str()) {
            response.headers_mut().append(name, value.clone());
        }
    }
    Ok(response)
}

/// Sends an outbound request of the gateway (`POST url` with `headers` and `body`): the
/// body of a successful answer.
pub(super) async fn send(
    http: &reqwest::Client,
    url: &str,
    headers: &[(String, String)],
    body: Vec<u8>,
) -> Option<Bytes> {
    let mut request = http.post(url).body(body);
    for (name, value) in headers {
        request = request.header(name, value);
    }
    let answer = async { request.send().await?.error_for_status()?.bytes().await }.await;
    answer
        .map_err(|err| tracing::debug!(%err, url, "no answer from the upstream"))
        .ok()
}
