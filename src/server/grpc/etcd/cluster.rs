//! `etcdserverpb.Cluster.MemberList`: Meridian's members listed as the etcd's members, each
//! with its gRPC address as its client URL. etcd's client (clientv3, with `AutoSyncInterval`
//! as TiDB sets it) replaces its endpoints with these URLs, so it keeps talking to Meridian
//! rather than finding the etcd behind it. Peer URLs stay empty: there is no etcd peer port
//! here to join. The header is the etcd's, from a MemberList forwarded to it, which also tells
//! the client that the etcd answers.

use tonic::transport::Channel;
use tonic::{Request, Response, Status};

use super::EtcdProxy;
use crate::auth::Call;
use crate::etcdpb::etcdserverpb::cluster_client::ClusterClient;
use crate::etcdpb::etcdserverpb::cluster_server::Cluster;
use crate::etcdpb::etcdserverpb::{Member, MemberListRequest, MemberListResponse};
use crate::proto::MemberInfo;

/// A Meridian member as etcd lists a member: `None` when it serves no gRPC.
fn as_etcd_member(m: &MemberInfo) -> Option<Member> {
    (!m.grpc_url.is_empty()).then(|| Member {
        id: m.id,
        name: m.name.clone(),
        peer_ur_ls: Vec::new(),
        client_ur_ls: vec![m.grpc_url.clone()],
        is_learner: false,
    })
}

#[tonic::async_trait]
impl Cluster for EtcdProxy {
    async fn member_list(
        &self,
        request: Request<MemberListRequest>,
    ) -> Result<Response<MemberListResponse>, Status> {
        let call = self.admit(request, Call::EtcdMemberList)?;
        let etcd = call
            .upstream
            .unary(call.message, call.hints, |channel: Channel, r| async move {
                ClusterClient::new(channel).member_list(r).await
            })
            .await?;
        let mut members: Vec<Member> = self
            .shared
            .membership
            .reply()
            .members
            .iter()
            .filter_map(as_etcd_member)
            .collect();
        members.sort_by_key(|m| m.id);
        Ok(Response::new(MemberListResponse {
            header: etcd.header,
            members,
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn members_list_their_grpc_url_as_client_url_and_need_one() {
        let m = MemberInfo {
            name: "pd-0".into(),
            id: 7,
            client_url: "127.0.0.1:2379".into(),
            admin_url: "https://127.0.0.1:9000".into(),
            grpc_url: "https://127.0.0.1:2379".into(),
        };
        let member = as_etcd_member(&m).unwrap();
        assert_eq!(
            (
                member.id,
                member.name.as_str(),
                member.client_ur_ls.as_slice()
            ),
            (7, "pd-0", &["https://127.0.0.1:2379".to_string()][..])
        );
        assert!(member.peer_ur_ls.is_empty() && !member.is_learner);
        let no_grpc = MemberInfo {
            grpc_url: String::new(),
            ..m
        };
        assert_eq!(as_etcd_member(&no_grpc), None);
    }
}
