//! `grpc.health.v1.Health`, from the node's live state (nothing is registered or cached):
//! service `""` and `leaf.v1.IdService` are the node's readiness (`/health?mode=all`),
//! `segment` and `snowflake` each mode's (`/health?mode=segment|snowflake`); any other name is
//! `NOT_FOUND` for `Check` and `SERVICE_UNKNOWN` for `Watch` (as the protocol says). `Watch`
//! sends the current status at once, then each change (polled every [`WATCH_POLL`]), and a
//! last `NOT_SERVING` when the node shuts down, which ends the stream. At most
//! `grpc.max_health_watches` streams are open at once (they need no credential, and each polls):
//! one more gets `RESOURCE_EXHAUSTED`.
use std::sync::Arc;
use std::time::Duration;

use futures::stream::BoxStream;
use leaf_api::grpc::health::health_check_response::ServingStatus;
use leaf_api::grpc::health::health_server::Health;
use leaf_api::grpc::health::{HealthCheckRequest, HealthCheckResponse};
use leaf_api::grpc::ID_SERVICE;
use tokio::sync::{watch, OwnedSemaphorePermit, Semaphore};
use tonic::{Code, Request, Response, Status};

use crate::metrics::GrpcMethod;
use crate::service::health::snowflake_ready;
use crate::service::App;

/// How often a `Watch` stream re-reads the node's state.
pub const WATCH_POLL: Duration = Duration::from_millis(250);

/// The health service over the node's [`App`]; `shutdown` turns true when the node stops.
#[derive(Clone)]
pub struct HealthService {
    app: Arc<App>,
    shutdown: watch::Receiver<bool>,
    /// One permit per open `Watch` stream.
    watches: Arc<Semaphore>,
}

impl HealthService {
    pub fn new(app: Arc<App>, shutdown: watch::Receiver<bool>) -> Self {
        let watches = Arc::new(Semaphore::new(app.config().grpc.max_health_watches as usize));
        HealthService { app, shutdown, watches }
    }
}

/// Whether `service` is serving now; `None` for a name this node does not know.
fn serving(app: &App, service: &str) -> Option<bool> {
    let h = app.health();
    match service {
        "" | ID_SERVICE => Some(h.ready),
        "segment" => Some(h.segment_ready),
        "snowflake" => Some(snowflake_ready(&h.snowflake)),
        _ => None,
    }
}

fn status_of(app: &App, service: &str) -> ServingStatus {
    match serving(app, service) {
        Some(true) => ServingStatus::Serving,
        Some(false) => ServingStatus::NotServing,
        None => ServingStatus::ServiceUnknown,
    }
}

fn answer(s: ServingStatus) -> HealthCheckResponse {
    HealthCheckResponse { status: s.into() }
}

/// What a `Watch` stream carries between polls.
struct Watching {
    app: Arc<App>,
    service: String,
    last: Option<ServingStatus>,
    shutdown: watch::Receiver<bool>,
    done: bool,
    /// Held while the stream is open.
    _permit: OwnedSemaphorePermit,
}

#[tonic::async_trait]
impl Health for HealthService {
    async fn check(&self, req: Request<HealthCheckRequest>) -> Result<Response<HealthCheckResponse>, Status> {
        let service = req.into_inner().service;
        let r = match serving(&self.app, &service) {
            Some(up) => Ok(Response::new(answer(if up { ServingStatus::Serving } else { ServingStatus::NotServing }))),
            None => {
                Err(Status::not_found(format!("unknown service {:?}", service.chars().take(128).collect::<String>())))
            }
        };
        self.app.metrics().grpc_call(GrpcMethod::HealthCheck, r.as_ref().map_or_else(|s| s.code(), |_| Code::Ok));
        r
    }

    type WatchStream = BoxStream<'static, Result<HealthCheckResponse, Status>>;

    async fn watch(&self, req: Request<HealthCheckRequest>) -> Result<Response<Self::WatchStream>, Status> {
        let Ok(permit) = self.watches.clone().try_acquire_owned() else {
            self.app.metrics().grpc_call(GrpcMethod::HealthWatch, Code::ResourceExhausted);
            let max = self.app.config().grpc.max_health_watches;
            return Err(Status::resource_exhausted(format!(
                "this node has {max} health watch streams open (grpc.max_health_watches); use Check, or retry later"
            )));
        };
        self.app.metrics().grpc_call(GrpcMethod::HealthWatch, Code::Ok);
        let start = Watching {
            _permit: permit,
            app: self.app.clone(),
            service: req.into_inner().service,
            last: None,
            shutdown: self.shutdown.clone(),
            done: false,
        };
        let stream = futures::stream::unfold(start, |mut w| async move {
            if w.done {
                return None;
            }
            loop {
                let now = status_of(&w.app, &w.service);
                if w.last != Some(now) {
                    w.last = Some(now);
                    return Some((Ok(answer(now)), w));
                }
                let stopping = tokio::select! {
                    _ = tokio::time::sleep(WATCH_POLL) => false,
                    // Shutting down (or the node is gone).
                    _ = w.shutdown.wait_for(|stop| *stop) => true,
                };
                if stopping {
                    // Say so once, then end the stream.
                    w.done = true;
                    return Some((Ok(answer(ServingStatus::NotServing)), w));
                }
            }
        });
        Ok(Response::new(Box::pin(stream)))
    }
}
