//! GC safe points, as PD keeps them for TiDB's GC worker and for services (BR, CDC, Lightning)
//! that must hold GC back: the cluster's GC safe point, which never moves backwards, and
//! per-service safe points with a TTL, whose minimum bounds what GC may collect. Pure: the
//! shell persists what a decision returns before it answers, and passes the time in.

mod safe_points;

pub use safe_points::{
    decode_service, encode_service, BadServiceId, DecodeError, GcUpdate, SafePoints, ServiceChange,
    ServiceSafePoint, ServiceUpdate, GC_WORKER,
};
