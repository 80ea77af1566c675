//! `leaf.v1.IdService`: the gRPC face of the ID routes. Each RPC validates like its HTTP
//! route (tag or key with [`validate_tag`], count 0 = 1 up to [`MAX_RANGE_BATCH`]) and then
//! calls the very functions `?format=ranges` calls ([`segment_ranges`], [`snowflake_ranges`],
//! [`decode_id`]); errors become statuses in [`super::error`] only. Every call is counted per
//! method and status code, and every error per code like HTTP's. Credentials are the HTTP
//! routes' too: the `authorization` metadata (`Bearer <token>`) through
//! [`crate::access::Access::check_ids`].
use std::sync::Arc;

use leaf_api::grpc::v1::id_service_server::IdService;
use leaf_api::grpc::v1::{
    DecodeSnowflakeRequest, GetSegmentIdsRequest, GetSnowflakeIdsRequest, IdList, IdRanges, SnowflakeParts,
};
use leaf_api::tag::{validate_tag, MAX_BATCH, MAX_RANGE_BATCH};
use leaf_api::ErrorCode;
use tonic::{Request, Response, Status};

use crate::http::ids::{decode_id, segment_list, segment_ranges, snowflake_ranges};
use crate::http::{ApiError, App};
use crate::metrics::GrpcMethod;

/// The ID service over the node's [`App`].
#[derive(Clone)]
pub struct Ids {
    pub app: Arc<App>,
}

/// A request's count: 0 means 1; above [`MAX_RANGE_BATCH`] is `invalid_count`.
fn count_of(count: u32) -> Result<u32, ApiError> {
    match count {
        0 => Ok(1),
        n if n <= MAX_RANGE_BATCH => Ok(n),
        n => Err(ApiError::new(ErrorCode::InvalidCount, format!("count must be from 1 to {MAX_RANGE_BATCH}, got {n}"))),
    }
}

/// The call's `authorization` metadata, as bytes.
fn authorization<T>(req: &Request<T>) -> Option<Vec<u8>> {
    req.metadata().get("authorization").map(|v| v.as_bytes().to_vec())
}

/// A tag or key checked like the HTTP routes check theirs (`what` prefixes the message).
fn checked(what: &str, name: &str) -> Result<(), ApiError> {
    validate_tag(name).map_err(|e| ApiError::new(ErrorCode::InvalidTag, format!("{what}{e}")))
}

impl Ids {
    /// Counts the call (and its error, like HTTP's error counter), and makes the answer.
    fn finish<T>(&self, method: GrpcMethod, r: Result<T, ApiError>) -> Result<Response<T>, Status> {
        match r {
            Ok(v) => {
                self.app.metrics.grpc_call(method, tonic::Code::Ok);
                Ok(Response::new(v))
            }
            Err(e) => {
                self.app.metrics.error(e.code);
                let s = super::error::status(e);
                self.app.metrics.grpc_call(method, s.code());
                Err(s)
            }
        }
    }
}

#[tonic::async_trait]
impl IdService for Ids {
    async fn get_segment_ids(&self, req: Request<GetSegmentIdsRequest>) -> Result<Response<IdRanges>, Status> {
        let auth = authorization(&req);
        let req = req.into_inner();
        let r = async {
            checked("", &req.tag)?;
            self.app.access.check_ids(auth.as_deref(), Some(&req.tag))?;
            let count = count_of(req.count)?;
            segment_ranges(&self.app, &req.tag, count).await
        }
        .await;
        self.finish(GrpcMethod::GetSegmentIds, r.map(IdRanges::from))
    }

    async fn get_snowflake_ids(&self, req: Request<GetSnowflakeIdsRequest>) -> Result<Response<IdRanges>, Status> {
        let auth = authorization(&req);
        let req = req.into_inner();
        let r = async {
            checked("snowflake key: ", &req.key)?;
            self.app.access.check_ids(auth.as_deref(), None)?;
            let count = count_of(req.count)?;
            snowflake_ranges(&self.app, &req.key, count).await
        }
        .await;
        self.finish(GrpcMethod::GetSnowflakeIds, r.map(IdRanges::from))
    }

    async fn decode_snowflake(&self, req: Request<DecodeSnowflakeRequest>) -> Result<Response<SnowflakeParts>, Status> {
        let r = decode_id(&self.app, req.into_inner().id).map(|d| SnowflakeParts {
            id: d.id,
            timestamp_ms: d.timestamp_ms,
            timestamp: d.timestamp,
            worker_id: d.worker_id.into(),
            sequence: d.sequence.into(),
        });
        self.finish(GrpcMethod::DecodeSnowflake, r)
    }

    async fn get_segment_id_list(&self, req: Request<GetSegmentIdsRequest>) -> Result<Response<IdList>, Status> {
        let auth = authorization(&req);
        let req = req.into_inner();
        let r = async {
            checked("", &req.tag)?;
            self.app.access.check_ids(auth.as_deref(), Some(&req.tag))?;
            let count = match req.count {
                0 => 1,
                n if n <= MAX_BATCH => n,
                n => {
                    let m = format!("count must be from 1 to {MAX_BATCH}, got {n}");
                    return Err(ApiError::new(ErrorCode::InvalidCount, m));
                }
            };
            segment_list(&self.app, &req.tag, count).await
        }
        .await;
        self.finish(GrpcMethod::GetSegmentIdList, r.map(|ids| IdList { ids }))
    }
}

impl Ids {
    /// Counts the call and makes the answer: [`Ids::finish`], for the other services.
    pub(super) fn answer<T>(app: &Arc<App>, method: GrpcMethod, r: Result<T, ApiError>) -> Result<Response<T>, Status> {
        Ids { app: app.clone() }.finish(method, r)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn count_zero_is_one_and_the_range_limit_holds() {
        assert_eq!(count_of(0).unwrap(), 1);
        assert_eq!(count_of(1).unwrap(), 1);
        assert_eq!(count_of(MAX_RANGE_BATCH).unwrap(), MAX_RANGE_BATCH);
        assert_eq!(count_of(MAX_RANGE_BATCH + 1).unwrap_err().code, ErrorCode::InvalidCount);
        assert_eq!(checked("", "a/b").unwrap_err().code, ErrorCode::InvalidTag);
        assert_eq!(checked("", "").unwrap_err().code, ErrorCode::InvalidTag);
        assert!(checked("", "leaf-segment-test").is_ok());
    }
}
