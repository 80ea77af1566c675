//! The gRPC ceiling: the most any unary `leaf.v1.IdService` server can do on this machine.
//!
//! A bare tonic server (plaintext HTTP/2, h2c) implementing the same generated `IdService`
//! trait as `leaf serve`, answering `GetSegmentIds` and `GetSnowflakeIds` with the constant
//! range `[1, 1 + count)` and no work at all: no validation, no ID logic, no metrics.
//! `bench/grpc.sh` measures it in the same run as leaf (`leaf bench grpc` against both), and
//! leaf's gRPC figures are ratios of it.
//!
//!   cargo run --release -p leaf-node --example grpc_ceiling -- 127.0.0.1:18090
use std::net::SocketAddr;

use leaf_api::grpc::v1::id_service_server::{IdService, IdServiceServer};
use leaf_api::grpc::v1::{
    DecodeSnowflakeRequest, GetSegmentIdsRequest, GetSnowflakeIdsRequest, IdList, IdRange, IdRanges,
    IssueNumberRequest, IssuedNumber, ReserveNumberRequest, SnowflakeParts, VoidNumberRequest,
};
use tonic::{Request, Response, Status};

struct Ceiling;

fn constant(count: u32) -> IdRanges {
    IdRanges { ranges: vec![IdRange { start: 1, end: 1 + i64::from(count.max(1)) }] }
}

#[tonic::async_trait]
impl IdService for Ceiling {
    async fn get_segment_ids(&self, req: Request<GetSegmentIdsRequest>) -> Result<Response<IdRanges>, Status> {
        Ok(Response::new(constant(req.get_ref().count)))
    }

    async fn get_snowflake_ids(&self, req: Request<GetSnowflakeIdsRequest>) -> Result<Response<IdRanges>, Status> {
        Ok(Response::new(constant(req.get_ref().count)))
    }

    async fn decode_snowflake(&self, req: Request<DecodeSnowflakeRequest>) -> Result<Response<SnowflakeParts>, Status> {
        Ok(Response::new(SnowflakeParts { id: req.get_ref().id, ..SnowflakeParts::default() }))
    }

    async fn get_segment_id_list(&self, req: Request<GetSegmentIdsRequest>) -> Result<Response<IdList>, Status> {
        Ok(Response::new(IdList { ids: (1..=i64::from(req.get_ref().count.max(1))).collect() }))
    }

    async fn issue_number(&self, req: Request<IssueNumberRequest>) -> Result<Response<IssuedNumber>, Status> {
        let IssueNumberRequest { tag, key, .. } = req.into_inner();
        Ok(Response::new(IssuedNumber { tag, key, number: 1, ..IssuedNumber::default() }))
    }

    async fn reserve_number(&self, req: Request<ReserveNumberRequest>) -> Result<Response<IssuedNumber>, Status> {
        let ReserveNumberRequest { tag, key, .. } = req.into_inner();
        Ok(Response::new(IssuedNumber { tag, key, number: 1, ..IssuedNumber::default() }))
    }

    async fn confirm_number(&self, req: Request<IssueNumberRequest>) -> Result<Response<IssuedNumber>, Status> {
        self.issue_number(req).await
    }

    async fn void_number(&self, req: Request<VoidNumberRequest>) -> Result<Response<IssuedNumber>, Status> {
        let VoidNumberRequest { tag, key, .. } = req.into_inner();
        Ok(Response::new(IssuedNumber { tag, key, number: 1, ..IssuedNumber::default() }))
    }
}

fn main() -> anyhow::Result<()> {
    let addr: SocketAddr = std::env::args().nth(1).unwrap_or_else(|| "127.0.0.1:18090".to_string()).parse()?;
    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
    rt.block_on(async {
        eprintln!("grpc_ceiling listening on {addr}");
        tonic::transport::Server::builder()
            .tcp_nodelay(true)
            .add_service(IdServiceServer::new(Ceiling))
            .serve(addr)
            .await
    })?;
    Ok(())
}
