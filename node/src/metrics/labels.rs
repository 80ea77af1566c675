//! The label sets of the node's metric families, and the enum whose values become labels
//! ([`GrpcMethod`]).
use prometheus_client::encoding::EncodeLabelSet;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(super) struct CodeLabels {
    pub(super) code: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(super) struct TokenLabels {
    pub(super) token: String,
    pub(super) name: String,
    pub(super) outcome: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(super) struct OutcomeLabels {
    pub(super) outcome: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(super) struct TagLabels {
    pub(super) tag: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(super) struct StoreLabels {
    pub(super) store: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(super) struct GrpcLabels {
    pub(super) method: String,
    pub(super) code: String,
}

/// The gRPC methods counted in `leaf_grpc_calls` (every method the node serves).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GrpcMethod {
    GetSegmentIds,
    GetSnowflakeIds,
    DecodeSnowflake,
    HealthCheck,
    HealthWatch,
    GetSegmentIdList,
    CreateTag,
    GetTag,
    ArchiveTag,
    RestoreTag,
    CreateTags,
    ListTemplates,
    PutTemplate,
    DeleteTemplate,
    IssueNumber,
    ReserveNumber,
    ConfirmNumber,
    VoidNumber,
}

impl GrpcMethod {
    pub const ALL: [GrpcMethod; 18] = [
        GrpcMethod::GetSegmentIds,
        GrpcMethod::GetSnowflakeIds,
        GrpcMethod::DecodeSnowflake,
        GrpcMethod::HealthCheck,
        GrpcMethod::HealthWatch,
        GrpcMethod::GetSegmentIdList,
        GrpcMethod::CreateTag,
        GrpcMethod::GetTag,
        GrpcMethod::ArchiveTag,
        GrpcMethod::RestoreTag,
        GrpcMethod::CreateTags,
        GrpcMethod::ListTemplates,
        GrpcMethod::PutTemplate,
        GrpcMethod::DeleteTemplate,
        GrpcMethod::IssueNumber,
        GrpcMethod::ReserveNumber,
        GrpcMethod::ConfirmNumber,
        GrpcMethod::VoidNumber,
    ];

    /// The method's gRPC path without the leading `/`.
    pub fn as_str(self) -> &'static str {
        match self {
            GrpcMethod::GetSegmentIds => "leaf.v1.IdService/GetSegmentIds",
            GrpcMethod::GetSnowflakeIds => "leaf.v1.IdService/GetSnowflakeIds",
            GrpcMethod::DecodeSnowflake => "leaf.v1.IdService/DecodeSnowflake",
            GrpcMethod::HealthCheck => "grpc.health.v1.Health/Check",
            GrpcMethod::HealthWatch => "grpc.health.v1.Health/Watch",
            GrpcMethod::GetSegmentIdList => "leaf.v1.IdService/GetSegmentIdList",
            GrpcMethod::CreateTag => "leaf.v1.AdminService/CreateTag",
            GrpcMethod::GetTag => "leaf.v1.AdminService/GetTag",
            GrpcMethod::ArchiveTag => "leaf.v1.AdminService/ArchiveTag",
            GrpcMethod::RestoreTag => "leaf.v1.AdminService/RestoreTag",
            GrpcMethod::CreateTags => "leaf.v1.AdminService/CreateTags",
            GrpcMethod::ListTemplates => "leaf.v1.AdminService/ListTemplates",
            GrpcMethod::PutTemplate => "leaf.v1.AdminService/PutTemplate",
            GrpcMethod::DeleteTemplate => "leaf.v1.AdminService/DeleteTemplate",
            GrpcMethod::IssueNumber => "leaf.v1.IdService/IssueNumber",
            GrpcMethod::ReserveNumber => "leaf.v1.IdService/ReserveNumber",
            GrpcMethod::ConfirmNumber => "leaf.v1.IdService/ConfirmNumber",
            GrpcMethod::VoidNumber => "leaf.v1.IdService/VoidNumber",
        }
    }
}
