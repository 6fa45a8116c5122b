//! `/regions`, `/regions/key`, `/region/id/{id}` and `/region/key/{key}`: routes the leader
//! knows (or, asked with PD's follower header, a follower's synced copy of them: `auth`), read through the request service (`ScanRegions`, `GetRegionById`, `GetRegion`), with
//! the sizes their leaders last reported asked of the shards that own them (the service's
//! views), and written in PD's `RegionInfo` shape. Keys arrive as PD takes them: URL-escaped raw bytes, or
//! hex with `format=hex`.

use std::collections::HashMap;

use axum::extract::{Path, State};
use axum::http::Uri;
use axum::{Extension, Json};

use super::auth::FromCopy;
use super::json::{self, RegionJson, RegionsJson};
use super::reply::Failure;
use super::{query_value, unescape, Api, PREFIX};
use crate::placement::Region;
use crate::proto::{Reply, Request, Response, MAX_SCAN_REGIONS};
use crate::server::service::views;

/// PD's default and largest `limit` for `/regions/key`.
const DEFAULT_LIMIT: usize = 16;
const MAX_LIMIT: usize = 10240;

/// The regions overlapping `[start, end)` (an empty end: to the end of the key space), at most
/// `limit`, asked a page at a time.
async fn scan_all(
    api: &Api,
    from_copy: bool,
    mut start: Vec<u8>,
    end: &[u8],
    limit: usize,
) -> Result<Vec<Region>, Failure> {
    let mut found: Vec<Region> = Vec::new();
    while found.len() < limit {
        let want = (limit - found.len()).min(MAX_SCAN_REGIONS as usize) as u32;
        let page = match api
            .read(
                Request::ScanRegions {
                    start: start.clone(),
                    end: end.to_vec(),
                    limit: want,
                },
                from_copy,
            )
            .await
        {
            Response::Ok(Reply::Regions(page)) => page,
            Response::Ok(other) => return Err(super::unexpected(other)),
            Response::Err(e) => return Err(e.into()),
        };
        let Some(last_end) = page.last().map(|r| r.end_key.clone()) else {
            break;
        };
        found.extend(page);
        if last_end.is_empty() || (!end.is_empty() && last_end.as_slice() >= end) {
            break;
        }
        start = last_end;
    }
    found.truncate(limit);
    Ok(found)
}

/// The sizes `regions` last reported, as the leader's shards hold them. A follower's copy
/// holds routes only, so an answer from it has none (its sizes read as zero).
async fn sizes_of(
    api: &Api,
    from_copy: bool,
    regions: &[Region],
) -> Result<HashMap<u64, crate::placement::RegionReport>, Failure> {
    if from_copy {
        return Ok(HashMap::new());
    }
    Ok(views::region_sizes(&api.shared, regions.iter().map(|r| r.id)).await?)
}

/// `regions` in PD's `RegionsInfo`, each with its reported sizes.
async fn with_sizes(
    api: &Api,
    from_copy: bool,
    regions: &[Region],
) -> Result<Json<RegionsJson>, Failure> {
    let sizes = sizes_of(api, from_copy, regions).await?;
    Ok(Json(json::regions(regions, &sizes)))
}

/// One region in PD's `RegionInfo`, with its reported sizes.
async fn one_with_sizes(
    api: &Api,
    from_copy: bool,
    region: &Region,
) -> Result<Json<RegionJson>, Failure> {
    let sizes = sizes_of(api, from_copy, std::slice::from_ref(region)).await?;
    Ok(Json(json::region(region, sizes.get(&region.id))))
}

pub async fn all(
    State(api): State<Api>,
    from_copy: Option<Extension<FromCopy>>,
) -> Result<Json<RegionsJson>, Failure> {
    let from_copy = from_copy.is_some();
    let regions = scan_all(&api, from_copy, Vec::new(), &[], usize::MAX).await?;
    with_sizes(&api, from_copy, &regions).await
}

/// PD's `ParseHexKeys`: with `format=hex` each key is hex; otherwise the bytes as given.
fn from_format(uri: &Uri, key: Vec<u8>) -> Result<Vec<u8>, Failure> {
    if query_value(uri, "format")?.as_deref() != Some(b"hex".as_slice()) {
        return Ok(key);
    }
    decode_hex(&key).ok_or_else(|| Failure::bad_request("encoding/hex: invalid byte"))
}

fn decode_hex(text: &[u8]) -> Option<Vec<u8>> {
    if text.len() % 2 != 0 || !text.iter().all(u8::is_ascii_hexdigit) {
        return None;
    }
    text.chunks(2)
        .map(|pair| {
            let s = std::str::from_utf8(pair).ok()?;
            u8::from_str_radix(s, 16).ok()
        })
        .collect()
}

pub async fn scan(
    State(api): State<Api>,
    from_copy: Option<Extension<FromCopy>>,
    uri: Uri,
) -> Result<Json<RegionsJson>, Failure> {
    let from_copy = from_copy.is_some();
    let start = from_format(&uri, query_value(&uri, "key")?.unwrap_or_default())?;
    let end = from_format(&uri, query_value(&uri, "end_key")?.unwrap_or_default())?;
    let limit = match query_value(&uri, "limit")? {
        None => DEFAULT_LIMIT,
        Some(raw) => {
            let text = String::from_utf8_lossy(&raw).into_owned();
            match text.parse::<i64>() {
                Ok(n) if n <= 0 => DEFAULT_LIMIT,
                Ok(n) => (n as usize).min(MAX_LIMIT),
                Err(_) => {
                    return Err(Failure::bad_request(format!(
                        "strconv.Atoi: parsing {text:?}: invalid syntax"
                    )))
                }
            }
        }
    };
    let regions = scan_all(&api, from_copy, start, &end, limit).await?;
    with_sizes(&api, from_copy, &regions).await
}

pub async fn by_id(
    State(api): State<Api>,
    from_copy: Option<Extension<FromCopy>>,
    Path(id): Path<String>,
) -> Result<Json<RegionJson>, Failure> {
    let from_copy = from_copy.is_some();
    let id: u64 = id.parse().map_err(|_| {
        Failure::bad_request(format!("strconv.ParseUint: parsing {id:?}: invalid syntax"))
    })?;
    if id == 0 {
        return Err(Failure::bad_request(
            "[PD:region:ErrRegionInvalidID]invalid region id",
        ));
    }
    match api.read(Request::GetRegionById { id }, from_copy).await {
        Response::Ok(Reply::Region(Some(r))) => one_with_sizes(&api, from_copy, &r).await,
        Response::Ok(Reply::Region(None)) => Err(Failure::not_found(format!(
            "[PD:region:ErrRegionNotFound]region {id} not found"
        ))),
        Response::Ok(other) => Err(super::unexpected(other)),
        Response::Err(e) => Err(e.into()),
    }
}

/// The key is read from the raw path, unescaped as PD's `url.QueryUnescape` does, so any
/// bytes can be asked for.
pub async fn by_key(
    State(api): State<Api>,
    from_copy: Option<Extension<FromCopy>>,
    uri: Uri,
) -> Result<Json<RegionJson>, Failure> {
    let from_copy = from_copy.is_some();
    let prefix = format!("{PREFIX}/region/key/");
    let raw = uri.path().strip_prefix(&prefix).unwrap_or_default();
    let key = from_format(&uri, unescape(raw, true)?)?;
    match api.read(Request::GetRegion { key }, from_copy).await {
        Response::Ok(Reply::Region(Some(r))) => one_with_sizes(&api, from_copy, &r).await,
        // PD formats its message with no argument here.
        Response::Ok(Reply::Region(None)) => Err(Failure::not_found(
            "[PD:region:ErrRegionNotFound]region %!v(MISSING) not found",
        )),
        Response::Ok(other) => Err(super::unexpected(other)),
        Response::Err(e) => Err(e.into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hex_keys_decode_or_refuse() {
        assert_eq!(decode_hex(b"7480FF"), Some(vec![0x74, 0x80, 0xff]));
        assert_eq!(decode_hex(b""), Some(vec![]));
        assert_eq!(decode_hex(b"7"), None);
        assert_eq!(decode_hex(b"zz"), None);
        assert_eq!(decode_hex(b"+1"), None);
    }
}
