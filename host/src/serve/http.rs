//! The HTTP face: each request read, admitted, prepared and handed to the gateway, its
//! response streamed back.

use super::*;

/// A request the gateway answers. Dropped before its response ended (the client went away),
/// it tells the gateway.
pub(super) struct InFlight {
    app: Arc<App>,
    id: RequestId,
}

impl Drop for InFlight {
    fn drop(&mut self) {
        let id = self.id;
        self.app.input(|gateway, now| {
            if gateway.holds(id) {
                tracing::info!(request = id, "the client went away mid-response");
                gateway.handle_client_gone(now, id);
            }
        });
        self.app.core().responders.remove(&id);
    }
}

/// Every request: its head decided on by the front, its body read, then handed to the
/// gateway, whose outputs for it are relayed — a stream as it comes, or a whole answer.
pub(super) async fn handle(State(app): State<Arc<App>>, request: Request) -> Response {
    let (parts, body) = request.into_parts();
    let mut headers: Vec<(&str, &str)> = parts
        .headers
        .iter()
        .map(|(n, v)| (n.as_str(), v.to_str().unwrap_or("(not text)")))
        .collect();
    if let (false, Some(authority)) = (
        parts.headers.contains_key(header::HOST),
        parts.uri.authority(),
    ) {
        headers.push(("host", authority.as_str()));
    }
    let head = HttpHead {
        method: parts.method.as_str(),
        path: parts.uri.path(),
        query: parts.uri.query().unwrap_or(""),
        headers: &headers,
    };
    let (admission, max_body) = {
        let core = app.core();
        (core.gateway.admit(&head), core.gateway.max_body())
    };
    let (tenant, cors) = match admission {
        Admission::Respond(r) => return response(r.status, r.headers, Body::from(r.body)),
        Admission::Admit { tenant, cors } => (tenant, cors),
    };
    let timeout = app.options.conn.body_timeout;
    let body = tokio::time::timeout(timeout, read_body(body, max_body))
        .await
        .unwrap_or_else(|_| {
            let after_ms = timeout.as_millis() as u64;
            tracing::debug!(after_ms, "a request's body did not arrive in time");
            Err(BodyError::TimedOut { after_ms })
        });
    // An API request is read before the gateway's lock is taken (and, when large, off the
    // threads that serve the other connections), so it holds up no other request.
    let parsed = match &body {
        Ok(bytes) if bytes.len() > PARSE_INLINE => {
            let (path, bytes, tenant) = (head.path.to_owned(), bytes.clone(), tenant.clone());
            tokio::task::spawn_blocking(move || prepare(&path, &tenant, &bytes))
                .await
                .ok()
                .flatten()
        }
        Ok(bytes) => prepare(head.path, &tenant, bytes),
        Err(_) => None,
    };
    // A conversation, or an approval, another node of the cluster holds is served there.
    let mut merge = None;
    if let (Some(cluster), Ok(bytes)) = (&app.options.cluster, &body) {
        let forwarded = parts
            .headers
            .get(FORWARDED_BY)
            .is_some_and(|h| cluster.forwarded(h.as_bytes()));
        if !forwarded {
            let placement = app
                .core()
                .gateway
                .placement(&head, &tenant, parsed.as_ref());
            if let Some(placement) = placement {
                let routed = to_cluster(
                    &app,
                    cluster,
                    &parts,
                    head.api(),
                    &placement,
                    &tenant,
                    bytes,
                );
                if let Some(response) = routed.await {
                    return response;
                }
            }
            if fans_out(head.path).is_some() {
                let asked = parts.uri.path_and_query().map_or(head.path, |p| p.as_str());
                merge = Some((cluster.clone(), parts.headers.clone(), asked.to_owned()));
            }
            // A conversation the console watches whose CLI runs on another node: streamed
            // from there.
            let elsewhere = app.core().gateway.streams_elsewhere(head.path);
            if elsewhere {
                if let Some(there) = live_elsewhere(&app, cluster, &parts).await {
                    return there;
                }
            }
        }
    }
    let id = app.next_request.fetch_add(1, Ordering::Relaxed);
    let (responder, mut parts) = mpsc::unbounded_channel();
    app.core().responders.insert(id, responder);
    let in_flight = InFlight {
        app: app.clone(),
        id,
    };
    let bytes = body.as_ref().map(|b| &b[..]).map_err(Clone::clone);
    let prepared = Prepared::new(bytes, parsed);
    app.input(|gateway, now| gateway.handle_http(now, id, &head, &tenant, prepared));
    let Some(Part::Head(status, mut headers)) = parts.recv().await else {
        let error = ApiError::new(ApiErrorKind::Api, "the gateway dropped the request");
        return response(500, Vec::new(), error.body(head.api()).to_string().into());
    };
    headers.extend(cors);
    if let Some(cluster) = &app.options.cluster {
        headers.push((NODE_HEADER.to_owned(), cluster.node().to_owned()));
    }
    let body = if headers
        .iter()
        .any(|(n, v)| n == "content-type" && v == "text/event-stream")
    {
        let stream = futures::stream::unfold((parts, in_flight), |(mut parts, in_flight)| async {
            let Part::Body(bytes) = parts.recv().await? else {
                return None;
            };
            Some((Ok::<_, Infallible>(bytes), (parts, in_flight)))
        });
        match merge {
            // Every node's approvals as they come, for as long as this node's stream lasts.
            Some((cluster, asked, _)) if status == 200 => {
                Body::from_stream(cluster_events(app.clone(), cluster, asked, stream))
            }
            _ => Body::from_stream(stream),
        }
    } else {
        // A whole answer is sent at once: its body is already in the channel.
        let mut bytes = Vec::new();
        while let Some(Part::Body(piece)) = parts.recv().await {
            bytes.extend_from_slice(&piece);
        }
        drop(in_flight);
        match merge {
            // The approvals, conversations or charts of every node.
            Some((cluster, asked, path)) if status == 200 => {
                Body::from(cluster_list(&app, &cluster, &asked, &path, bytes).await)
            }
            _ => Body::from(bytes),
        }
    };
    response(status, headers, body)
}

/// A request body, up to `max` bytes.
pub(super) async fn read_body(body: Body, max: usize) -> Result<Bytes, BodyError> {
    let mut stream = body.into_data_stream();
    let mut bytes = Vec::new();
    while let Some(piece) = stream.next().await {
        let piece = piece.map_err(|e| BodyError::Unreadable(e.to_string()))?;
        if bytes.len() + piece.len() > max {
            return Err(BodyError::TooLarge);
        }
        bytes.extend_from_slice(&piece);
    }
    Ok(bytes.into())
}

pub(super) fn response(status: u16, headers: Vec<(String, String)>, body: Body) -> Response {
    let mut response = Response::new(body);
    *response.status_mut() =
        StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    for (name, value) in headers {
        if let (Ok(name), Ok(value)) = (
            HeaderName::from_bytes(name.as_bytes()),
            HeaderValue::from_str(&value),
        ) {
            response.headers_mut().append(name, value);
        }
    }
    response
}
