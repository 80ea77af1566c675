//! `leaf.v1.IdService`: the gRPC face of the ID routes. Each RPC validates like its HTTP
//! route ([`validate::tag`] or [`validate::key`], count 0 = 1 up to the range limit) and then
//! calls the very operations `?format=ranges` calls ([`App::segment_ranges`],
//! [`App::snowflake_ranges`], [`App::decode_snowflake`]); errors become statuses in
//! [`super::error`] only. Every call is counted per
//! method and status code, and every error per code like HTTP's. Credentials are the HTTP
//! routes' too: the `authorization` metadata (`Bearer <token>`) through
//! [`crate::access::Access::check_ids`].
use std::sync::Arc;

use leaf_api::grpc::v1::id_service_server::IdService;
use leaf_api::grpc::v1::{
    DecodeSnowflakeRequest, GetSegmentIdsRequest, GetSnowflakeIdsRequest, IdList, IdRanges, IssueNumberRequest,
    IssuedNumber, ReserveNumberRequest, SnowflakeParts, VoidNumberRequest,
};
use leaf_api::ErrorCode;
use tonic::{Request, Response, Status};

use crate::access::credentials::ConnInfo;
use crate::access::IdAsk;
use crate::metrics::GrpcMethod;
use crate::service::gapless::{NumberCaller, NumberRequest};
use crate::service::{validate, ApiError, App};

/// The ID service over the node's [`App`].
#[derive(Clone)]
pub struct Ids {
    pub app: Arc<App>,
}

/// The call's `authorization` metadata, as bytes.
fn authorization<T>(req: &Request<T>) -> Option<Vec<u8>> {
    req.metadata().get("authorization").map(|v| v.as_bytes().to_vec())
}

/// The client's address, from the connection the listener put into the call.
fn client_addr<T>(req: &Request<T>) -> Result<std::net::IpAddr, ApiError> {
    match req.extensions().get::<ConnInfo>() {
        Some(conn) => Ok(conn.peer.ip()),
        None => Err(ApiError::new(ErrorCode::Forbidden, "the caller's connection is unknown")),
    }
}

impl Ids {
    /// Counts the call (and its error, like HTTP's error counter), and makes the answer.
    fn finish<T>(&self, method: GrpcMethod, r: Result<T, ApiError>) -> Result<Response<T>, Status> {
        match r {
            Ok(v) => {
                self.app.metrics().grpc_call(method, tonic::Code::Ok);
                Ok(Response::new(v))
            }
            Err(e) => {
                self.app.metrics().error(e.code);
                let s = super::error::status(e);
                self.app.metrics().grpc_call(method, s.code());
                Err(s)
            }
        }
    }
}

#[tonic::async_trait]
impl IdService for Ids {
    async fn get_segment_ids(&self, req: Request<GetSegmentIdsRequest>) -> Result<Response<IdRanges>, Status> {
        let (auth, addr) = (authorization(&req), client_addr(&req));
        let req = req.into_inner();
        let r = async {
            validate::tag(&req.tag)?;
            let count = validate::range_count(req.count)?;
            let who = self.app.check_ids(auth.as_deref(), Some(&req.tag), IdAsk { addr: addr?, ids: count })?;
            self.app.segment_ranges(&req.tag, count, who).await
        }
        .await;
        self.finish(GrpcMethod::GetSegmentIds, r.map(IdRanges::from))
    }

    async fn get_snowflake_ids(&self, req: Request<GetSnowflakeIdsRequest>) -> Result<Response<IdRanges>, Status> {
        let (auth, addr) = (authorization(&req), client_addr(&req));
        let req = req.into_inner();
        let r = async {
            validate::key(&req.key)?;
            let count = validate::range_count(req.count)?;
            self.app.check_ids(auth.as_deref(), None, IdAsk { addr: addr?, ids: count })?;
            self.app.snowflake_ranges(&req.key, count).await
        }
        .await;
        self.finish(GrpcMethod::GetSnowflakeIds, r.map(IdRanges::from))
    }

    async fn decode_snowflake(&self, req: Request<DecodeSnowflakeRequest>) -> Result<Response<SnowflakeParts>, Status> {
        let r = self.app.decode_snowflake(req.into_inner().id).map(|d| SnowflakeParts {
            id: d.id,
            timestamp_ms: d.timestamp_ms,
            timestamp: d.timestamp,
            worker_id: d.worker_id.into(),
            sequence: d.sequence.into(),
        });
        self.finish(GrpcMethod::DecodeSnowflake, r)
    }

    async fn get_segment_id_list(&self, req: Request<GetSegmentIdsRequest>) -> Result<Response<IdList>, Status> {
        let (auth, addr) = (authorization(&req), client_addr(&req));
        let req = req.into_inner();
        let r = async {
            validate::tag(&req.tag)?;
            let count = validate::list_count(req.count)?;
            let who = self.app.check_ids(auth.as_deref(), Some(&req.tag), IdAsk { addr: addr?, ids: count })?;
            self.app.segment_list(&req.tag, count, who).await
        }
        .await;
        self.finish(GrpcMethod::GetSegmentIdList, r.map(|ids| IdList { ids }))
    }

    async fn issue_number(&self, req: Request<IssueNumberRequest>) -> Result<Response<IssuedNumber>, Status> {
        let (auth, addr) = (authorization(&req), client_addr(&req));
        let req = req.into_inner();
        let r = async {
            validate::tag(&req.tag)?;
            let addr = addr?;
            let who = self.app.check_ids(auth.as_deref(), Some(&req.tag), IdAsk { addr, ids: 1 })?;
            self.app
                .gapless_number(&req.tag, &req.key, (NumberRequest::Issue, req.secret), NumberCaller { who, addr })
                .await
        }
        .await;
        self.finish(GrpcMethod::IssueNumber, r.map(IssuedNumber::from))
    }

    async fn reserve_number(&self, req: Request<ReserveNumberRequest>) -> Result<Response<IssuedNumber>, Status> {
        let (auth, addr) = (authorization(&req), client_addr(&req));
        let req = req.into_inner();
        let r = async {
            validate::tag(&req.tag)?;
            let addr = addr?;
            let who = self.app.check_ids(auth.as_deref(), Some(&req.tag), IdAsk { addr, ids: 1 })?;
            let hold_seconds = (req.hold_seconds != 0).then_some(req.hold_seconds);
            let ask = (NumberRequest::Reserve { hold_seconds }, req.secret);
            self.app.gapless_number(&req.tag, &req.key, ask, NumberCaller { who, addr }).await
        }
        .await;
        self.finish(GrpcMethod::ReserveNumber, r.map(IssuedNumber::from))
    }

    async fn confirm_number(&self, req: Request<IssueNumberRequest>) -> Result<Response<IssuedNumber>, Status> {
        let (auth, addr) = (authorization(&req), client_addr(&req));
        let req = req.into_inner();
        let r = async {
            validate::tag(&req.tag)?;
            let addr = addr?;
            let who = self.app.check_ids(auth.as_deref(), Some(&req.tag), IdAsk { addr, ids: 1 })?;
            self.app
                .gapless_number(&req.tag, &req.key, (NumberRequest::Confirm, req.secret), NumberCaller { who, addr })
                .await
        }
        .await;
        self.finish(GrpcMethod::ConfirmNumber, r.map(IssuedNumber::from))
    }

    async fn void_number(&self, req: Request<VoidNumberRequest>) -> Result<Response<IssuedNumber>, Status> {
        let (auth, addr) = (authorization(&req), client_addr(&req));
        let req = req.into_inner();
        let r = async {
            validate::tag(&req.tag)?;
            let addr = addr?;
            let who = self.app.check_ids(auth.as_deref(), Some(&req.tag), IdAsk { addr, ids: 1 })?;
            let ask = (NumberRequest::Void { reason: req.reason }, req.secret);
            self.app.gapless_number(&req.tag, &req.key, ask, NumberCaller { who, addr }).await
        }
        .await;
        self.finish(GrpcMethod::VoidNumber, r.map(IssuedNumber::from))
    }
}

impl Ids {
    /// Counts the call and makes the answer: [`Ids::finish`], for the other services.
    pub(super) fn answer<T>(app: &Arc<App>, method: GrpcMethod, r: Result<T, ApiError>) -> Result<Response<T>, Status> {
        Ids { app: app.clone() }.finish(method, r)
    }
}
