//! A resource group's record as PD keeps it (kvproto's `ResourceGroup`, which is also what is
//! persisted and what TiDB reads from the meta storage): the reserved `default` group, the
//! checks AddResourceGroup makes, and how ModifyResourceGroup patches a record. Meridian has
//! no keyspaces, so every group is in PD's null keyspace. Pure: no I/O, no clock.

use prost::Message;

use super::error::{GroupError, MAX_NAME_LEN, MAX_PRIORITY};
use super::limit::{UNLIMITED_BURST, UNLIMITED_RATE};
use crate::kvproto::resource_manager::{
    keyspace_id_value, GroupMode, GroupRequestUnitSettings, KeyspaceIdValue, ResourceGroup,
    TokenBucket, TokenLimitSettings,
};

/// The group every cluster has and no one deletes.
pub const DEFAULT_GROUP: &str = "default";
/// PD's `middlePriority`, the default group's.
const DEFAULT_PRIORITY: u32 = 8;
/// PD's null keyspace (`math.MaxUint32`), the only one Meridian has.
pub const NULL_KEYSPACE: u32 = u32::MAX;
/// The largest record a group may have, encoded. PD has no bound; runaway and background
/// settings are the only parts that grow, and real ones are far smaller.
pub const MAX_GROUP_BYTES: usize = 64 << 10;

/// PD's default group: RU mode, unlimited fill rate and burst, middle priority.
pub fn default_group() -> ResourceGroup {
    ResourceGroup {
        name: DEFAULT_GROUP.to_string(),
        mode: GroupMode::RuMode as i32,
        r_u_settings: Some(GroupRequestUnitSettings {
            r_u: Some(TokenBucket {
                settings: Some(TokenLimitSettings {
                    fill_rate: UNLIMITED_RATE,
                    burst_limit: UNLIMITED_BURST,
                    max_tokens: 0.0,
                }),
                tokens: 0.0,
            }),
        }),
        priority: DEFAULT_PRIORITY,
        ..Default::default()
    }
}

/// The keyspace a request names, which must be the null one: absent (an older client), PD's
/// null id, or a keyspace identity this subset does not decode.
pub fn check_keyspace(keyspace: Option<&KeyspaceIdValue>) -> Result<(), GroupError> {
    match keyspace.and_then(|k| k.keyspace.as_ref()) {
        Some(keyspace_id_value::Keyspace::Value(id)) if *id != NULL_KEYSPACE => {
            Err(GroupError::KeyspaceNotExists(*id))
        }
        _ => Ok(()),
    }
}

/// The keyspace every answer names.
pub fn null_keyspace() -> Option<KeyspaceIdValue> {
    Some(KeyspaceIdValue {
        keyspace: Some(keyspace_id_value::Keyspace::Value(NULL_KEYSPACE)),
    })
}

/// The settings of a group's RU bucket, when it has them.
pub fn ru_settings(group: &ResourceGroup) -> Option<&TokenLimitSettings> {
    group.r_u_settings.as_ref()?.r_u.as_ref()?.settings.as_ref()
}

fn check_size(group: &ResourceGroup) -> Result<(), GroupError> {
    let bytes = group.encoded_len();
    if bytes > MAX_GROUP_BYTES {
        return Err(GroupError::TooLarge(format!(
            "the resource group's settings take {bytes} bytes, more than {MAX_GROUP_BYTES}"
        )));
    }
    Ok(())
}

/// The record AddResourceGroup stores for `group`, or PD's refusal. PD panics on raw mode
/// and keeps a group of unknown mode with no settings; both are refused here.
pub fn new_record(mut group: ResourceGroup) -> Result<ResourceGroup, GroupError> {
    check_keyspace(group.keyspace_id.as_ref())?;
    if group.name.is_empty() || group.name.len() > MAX_NAME_LEN {
        return Err(GroupError::Invalid("the group name"));
    }
    if group.priority > MAX_PRIORITY {
        return Err(GroupError::Invalid("the group priority"));
    }
    if group.mode != GroupMode::RuMode as i32 {
        return Err(GroupError::Invalid("the group mode"));
    }
    group.keyspace_id = None;
    group.ru_stats = None;
    group.raw_resource_settings = None;
    check_size(&group)?;
    Ok(group)
}

/// `current` patched by ModifyResourceGroup's `update` (PD's `PatchSettings`): priority,
/// runaway and background settings replaced, the RU bucket's settings replaced when given,
/// and the update's token count returned as a delta for the bucket.
pub fn patched(
    current: &ResourceGroup,
    update: &ResourceGroup,
) -> Result<(ResourceGroup, f64), GroupError> {
    check_keyspace(update.keyspace_id.as_ref())?;
    if update.mode != current.mode {
        return Err(GroupError::ModeChanged);
    }
    if update.priority > MAX_PRIORITY {
        return Err(GroupError::Priority);
    }
    let Some(settings) = update.r_u_settings.as_ref() else {
        return Err(GroupError::NoRuSettings);
    };
    let mut next = current.clone();
    next.priority = update.priority;
    next.runaway_settings = update.runaway_settings.clone();
    next.background_settings = update.background_settings.clone();
    let mut delta = 0.0;
    if let Some(bucket) = &settings.r_u {
        delta = bucket.tokens;
        if let Some(limits) = &bucket.settings {
            let ru = next
                .r_u_settings
                .get_or_insert_with(Default::default)
                .r_u
                .get_or_insert_with(Default::default);
            ru.settings = Some(*limits);
        }
    }
    check_size(&next)?;
    Ok((next, delta))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kvproto::resource_manager::RunawaySettings;

    fn ru_group(name: &str, fill_rate: u64, burst_limit: i64) -> ResourceGroup {
        ResourceGroup {
            name: name.into(),
            mode: GroupMode::RuMode as i32,
            r_u_settings: Some(GroupRequestUnitSettings {
                r_u: Some(TokenBucket {
                    settings: Some(TokenLimitSettings {
                        fill_rate,
                        burst_limit,
                        max_tokens: 0.0,
                    }),
                    tokens: 0.0,
                }),
            }),
            ..Default::default()
        }
    }

    #[test]
    fn new_groups_are_checked_as_pd_checks_them() {
        assert!(new_record(ru_group("rg1", 100, 100)).is_ok());
        assert_eq!(
            new_record(ru_group("", 1, 1)).unwrap_err().to_string(),
            "[PD:resourcemanager:ErrInvalidGroup]invalid group settings, please check the group name"
        );
        assert!(new_record(ru_group(&"x".repeat(32), 1, 1)).is_ok());
        assert_eq!(
            new_record(ru_group(&"x".repeat(33), 1, 1)),
            Err(GroupError::Invalid("the group name"))
        );
        let mut g = ru_group("p", 1, 1);
        g.priority = 17;
        assert_eq!(
            new_record(g),
            Err(GroupError::Invalid("the group priority"))
        );
        let mut raw = ru_group("raw", 1, 1);
        raw.mode = GroupMode::RawMode as i32;
        assert_eq!(new_record(raw), Err(GroupError::Invalid("the group mode")));
        let mut other = ru_group("k", 1, 1);
        other.keyspace_id = Some(KeyspaceIdValue {
            keyspace: Some(keyspace_id_value::Keyspace::Value(7)),
        });
        assert_eq!(
            new_record(other).unwrap_err().to_string(),
            "[PD:resourcemanager:ErrKeyspaceNotExists]the keyspace does not exist with id 7"
        );
        let mut null = ru_group("k", 1, 1);
        null.keyspace_id = null_keyspace();
        assert_eq!(new_record(null).unwrap().keyspace_id, None);
        let mut huge = ru_group("h", 1, 1);
        huge.runaway_settings = Some(RunawaySettings {
            switch_group_name: "s".repeat(MAX_GROUP_BYTES),
            ..Default::default()
        });
        assert!(matches!(new_record(huge), Err(GroupError::TooLarge(_))));
    }

    #[test]
    fn a_modification_patches_as_pd_does() {
        let mut current = ru_group("rg", 100, 200);
        current.priority = 8;
        let mut update = ru_group("rg", 300, -1);
        update.priority = 1;
        update
            .r_u_settings
            .as_mut()
            .unwrap()
            .r_u
            .as_mut()
            .unwrap()
            .tokens = 50.0;
        let (next, delta) = patched(&current, &update).unwrap();
        assert_eq!(delta, 50.0);
        assert_eq!(next.priority, 1);
        let s = ru_settings(&next).unwrap();
        assert_eq!((s.fill_rate, s.burst_limit), (300, -1));

        let mut raw = update.clone();
        raw.mode = GroupMode::RawMode as i32;
        assert_eq!(
            patched(&current, &raw).unwrap_err().to_string(),
            "only support reconfigure in same mode, maybe you should delete and create a new one"
        );
        let mut high = update.clone();
        high.priority = 17;
        assert_eq!(patched(&current, &high), Err(GroupError::Priority));
        let mut bare = update.clone();
        bare.r_u_settings = None;
        assert_eq!(patched(&current, &bare), Err(GroupError::NoRuSettings));
        // No bucket in the update: settings kept, no delta.
        let mut keep = update;
        keep.r_u_settings = Some(GroupRequestUnitSettings { r_u: None });
        let (next, delta) = patched(&current, &keep).unwrap();
        assert_eq!(delta, 0.0);
        assert_eq!(ru_settings(&next).unwrap().fill_rate, 100);
    }

    #[test]
    fn the_default_group_is_pds() {
        let d = default_group();
        assert_eq!(d.name, "default");
        assert_eq!(d.mode, GroupMode::RuMode as i32);
        assert_eq!(d.priority, 8);
        let s = ru_settings(&d).unwrap();
        assert_eq!((s.fill_rate, s.burst_limit), (2_147_483_647, -1));
    }
}
