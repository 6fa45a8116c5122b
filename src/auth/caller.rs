//! Who is calling, as one connection is: the roles its certificate grants and, when
//! bind-store-identity is on and it holds the `store` role, the seat that says which store it
//! speaks for. Made once per connection (`tls::ClientAuth::identify`) and handed to each of its
//! streams; cloning it is a copy and at most one reference count.

use std::sync::Arc;

use super::{Grants, StoreSeat};

#[derive(Debug, Clone, Default)]
pub struct Caller {
    pub grants: Grants,
    /// `None`: calls naming a store are not checked against one (binding off, no `store`
    /// role, or client authentication off).
    pub store: Option<Arc<StoreSeat>>,
}

impl Caller {
    /// A caller with `grants` and no store binding.
    pub fn of_grants(grants: Grants) -> Caller {
        Caller {
            grants,
            store: None,
        }
    }
}
