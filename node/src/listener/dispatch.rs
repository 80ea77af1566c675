//! The service of one connection: gRPC calls (HTTP/2, `application/grpc*`, when enabled) to
//! the tonic routes, else the HTTP fast ID path, else the HTTP router inside its layers. Every
//! HTTP answer is timed per route template and status.
//!
//! hyper keeps each request's future in the connection and moves it there: the router's and
//! gRPC's (hundreds of bytes of layer state) are boxed, so a fast-path answer moves only its
//! own few bytes.
use std::sync::Arc;

use axum::response::Response;
use axum::Router;
use futures::future::Either;
use tower::ServiceExt;

use crate::access::credentials::ConnInfo;
use crate::metrics::Route;
use crate::service::App;

/// The service of one connection: gRPC calls (HTTP/2, `application/grpc*`, when enabled) to
/// the tonic routes, else the fast ID path, else the router inside its layers.
pub(super) fn connection(
    app: &Arc<App>,
    routes: &Router,
    grpc: &Option<tonic::service::Routes>,
    info: ConnInfo,
    activity: Option<Arc<super::idle::Activity>>,
) -> impl hyper::service::Service<
    hyper::Request<hyper::body::Incoming>,
    Response = Response,
    Error = std::convert::Infallible,
    Future: Send,
> + Clone {
    use futures::FutureExt;
    let routes = crate::http::service(app.clone(), routes.clone(), info.clone());
    let app = app.clone();
    let grpc = grpc.clone();
    hyper::service::service_fn(move |mut req: hyper::Request<hyper::body::Incoming>| {
        // Held until the response is ready (HTTP/2 only: the idle timeout's count).
        let busy = activity.as_ref().map(|a| a.begin());
        let answer = if let Some(grpc) = grpc.as_ref().filter(|_| crate::grpc::is_grpc(&req)) {
            // The admin service checks who is calling (the HTTP auth layer is not in the way).
            req.extensions_mut().insert(info.clone());
            let call = grpc.clone().oneshot(req).map(|r| r.map(|resp| resp.map(axum::body::Body::new)));
            Either::Right(call.boxed())
        } else {
            let started = std::time::Instant::now();
            // The fast path times its own answer (it holds the app already).
            match crate::http::fast_path(&app, &req, started, info.peer.ip()) {
                Some(fast) => Either::Left(fast),
                None => {
                    let (route, timed) = (Route::of(req.uri().path()), app.clone());
                    let done = move |r: Result<Response, std::convert::Infallible>| {
                        if let Ok(r) = &r {
                            crate::http::answered(&timed, route, started, r);
                        }
                        r
                    };
                    Either::Right(routes.clone().oneshot(req.map(axum::body::Body::new)).map(done).boxed())
                }
            }
        };
        answer.map(move |r| {
            drop(busy);
            r
        })
    })
}
