//! Images as the agent gets them (docs/limits.md, "Responses"): at most `image_max_px` on the
//! long side and within the per-image byte cap (`max_image_bytes`), scaled down once per image,
//! off the runtime (`spawn_blocking`), and kept in a small cache so that `get_execution` of the
//! same run does not scale again. The original stays the run's resource
//! (`kernel-mcp://runs/{run_id}/outputs/{index}`), and the notebook export keeps it.
//!
//! PNG stays PNG and JPEG stays JPEG; a PNG that is still over the byte cap at the pixel limit
//! becomes a JPEG, then both shrink by a quarter at a time. GIF and anything that does not
//! decode are passed through as they came (or linked, when over the byte cap).

use std::collections::VecDeque;
use std::io::Cursor;
use std::sync::{Arc, Mutex};

use base64::Engine;
use image::{DynamicImage, ImageFormat, ImageReader, Limits};

use crate::session::types::ImageData;

/// An image for one response.
#[derive(Debug, Clone)]
pub struct AgentImage {
    pub mime: String,
    /// Base64.
    pub data: String,
    /// Decoded bytes.
    pub bytes: usize,
    /// `(original, shown)` sizes in pixels, when it was scaled.
    pub scaled: Option<((u32, u32), (u32, u32))>,
}

/// Scaled images kept (each at most `max_image_bytes`, 1 MiB by default).
const CACHE_ENTRIES: usize = 8;

/// Largest side or pixel area decoded at all (a decompression bomb is passed through as is,
/// and linked when over the byte cap).
const MAX_DECODE_SIDE: u32 = 30_000;
const MAX_DECODE_ALLOC: u64 = 512 * 1024 * 1024;

type Key = (String, usize, usize);

static CACHE: Mutex<VecDeque<(Key, Arc<AgentImage>)>> = Mutex::new(VecDeque::new());

/// The image the agent gets for output `index` of run `run`: `img` itself when it fits both
/// limits, else a scaled copy. `None` when it does not fit and cannot be scaled (not PNG or
/// JPEG, or it does not decode): the caller links the original instead.
pub async fn for_agent(
    run: &str,
    index: usize,
    img: &ImageData,
    max_px: u32,
    max_bytes: usize,
) -> Option<Arc<AgentImage>> {
    let key: Key = (run.to_string(), index, img.data.len());
    if let Some(hit) = cached(&key) {
        return Some(hit);
    }
    let original = || {
        Arc::new(AgentImage {
            mime: img.mime.clone(),
            data: img.data.clone(),
            bytes: img.bytes,
            scaled: None,
        })
    };
    let format = match img.mime.as_str() {
        "image/png" => ImageFormat::Png,
        "image/jpeg" => ImageFormat::Jpeg,
        _ => return (img.bytes <= max_bytes).then(original),
    };
    let b64 = img.data.clone();
    let bytes = img.bytes;
    let scaled = tokio::task::spawn_blocking(move || scale(&b64, format, max_px, max_bytes))
        .await
        .ok()
        .flatten();
    let out = match scaled {
        Some(Scaled::Fits) => original(),
        Some(Scaled::To(image)) => Arc::new(image),
        None if bytes <= max_bytes => original(),
        None => return None,
    };
    remember(key, out.clone());
    Some(out)
}

enum Scaled {
    /// Within both limits as it is.
    Fits,
    To(AgentImage),
}

fn cached(key: &Key) -> Option<Arc<AgentImage>> {
    let cache = CACHE.lock().unwrap_or_else(|e| e.into_inner());
    cache.iter().find(|(k, _)| k == key).map(|(_, v)| v.clone())
}

fn remember(key: Key, image: Arc<AgentImage>) {
    // Only scaled copies are worth keeping; an original is in the run already.
    if image.scaled.is_none() {
        return;
    }
    let mut cache = CACHE.lock().unwrap_or_else(|e| e.into_inner());
    cache.retain(|(k, _)| *k != key);
    if cache.len() >= CACHE_ENTRIES {
        cache.pop_front();
    }
    cache.push_back((key, image));
}

/// Decode, scale and encode (blocking: run it on the blocking pool). `None` when the image
/// does not decode.
fn scale(b64: &str, format: ImageFormat, max_px: u32, max_bytes: usize) -> Option<Scaled> {
    let raw = base64::engine::general_purpose::STANDARD
        .decode(b64.as_bytes())
        .ok()?;
    let mut limits = Limits::default();
    limits.max_image_width = Some(MAX_DECODE_SIDE);
    limits.max_image_height = Some(MAX_DECODE_SIDE);
    limits.max_alloc = Some(MAX_DECODE_ALLOC);
    let reader = |raw: &[u8]| {
        let mut r = ImageReader::with_format(Cursor::new(raw.to_vec()), format);
        r.limits(limits.clone());
        r
    };
    let (w, h) = reader(&raw).into_dimensions().ok()?;
    if w.max(h) <= max_px && raw.len() <= max_bytes {
        return Some(Scaled::Fits);
    }
    let decoded = reader(&raw).decode().ok()?;
    let mut side = max_px.min(w.max(h));
    let mut as_jpeg = format == ImageFormat::Jpeg;
    for _ in 0..8 {
        let small = decoded.resize(side, side, image::imageops::FilterType::Triangle);
        let encoded = encode(&small, as_jpeg)?;
        if encoded.len() <= max_bytes {
            return Some(Scaled::To(AgentImage {
                mime: if as_jpeg { "image/jpeg" } else { "image/png" }.into(),
                data: base64::engine::general_purpose::STANDARD.encode(&encoded),
                bytes: encoded.len(),
                scaled: Some(((w, h), (small.width(), small.height()))),
            }));
        }
        if as_jpeg {
            side = (side * 3 / 4).max(16);
        } else {
            as_jpeg = true;
        }
    }
    None
}

fn encode(image: &DynamicImage, jpeg: bool) -> Option<Vec<u8>> {
    let mut out = Cursor::new(Vec::new());
    if jpeg {
        let rgb = DynamicImage::ImageRgb8(image.to_rgb8());
        let encoder = image::codecs::jpeg::JpegEncoder::new_with_quality(&mut out, 85);
        rgb.write_with_encoder(encoder).ok()?;
    } else {
        image.write_to(&mut out, ImageFormat::Png).ok()?;
    }
    Some(out.into_inner())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn png(w: u32, h: u32) -> ImageData {
        let img = DynamicImage::ImageRgb8(image::RgbImage::from_fn(w, h, |x, y| {
            image::Rgb([(x % 256) as u8, (y % 256) as u8, ((x + y) % 256) as u8])
        }));
        let mut out = Cursor::new(Vec::new());
        img.write_to(&mut out, ImageFormat::Png).unwrap();
        let raw = out.into_inner();
        ImageData {
            mime: "image/png".into(),
            bytes: raw.len(),
            data: base64::engine::general_purpose::STANDARD.encode(&raw),
        }
    }

    fn dimensions(a: &AgentImage) -> (u32, u32) {
        let raw = base64::engine::general_purpose::STANDARD
            .decode(&a.data)
            .unwrap();
        ImageReader::new(Cursor::new(raw))
            .with_guessed_format()
            .unwrap()
            .into_dimensions()
            .unwrap()
    }

    #[tokio::test]
    async fn a_large_image_is_scaled_to_the_long_side_limit_keeping_its_shape() {
        let img = png(4000, 3000);
        let a = for_agent("run-t1", 0, &img, 1568, 1024 * 1024)
            .await
            .unwrap();
        assert_eq!(dimensions(&a), (1568, 1176));
        assert_eq!(a.scaled, Some(((4000, 3000), (1568, 1176))));
        assert!(a.bytes <= 1024 * 1024);
        // The same image again comes from the cache.
        let again = for_agent("run-t1", 0, &img, 1568, 1024 * 1024)
            .await
            .unwrap();
        assert!(Arc::ptr_eq(&a, &again));
    }

    #[tokio::test]
    async fn a_small_image_is_passed_through_and_an_unknown_one_too() {
        let img = png(64, 32);
        let a = for_agent("run-t2", 0, &img, 1568, 1024 * 1024)
            .await
            .unwrap();
        assert_eq!(a.data, img.data);
        assert_eq!(a.scaled, None);
        let gif = ImageData {
            mime: "image/gif".into(),
            data: "R0lGODlhAQABAAAAACw=".into(),
            bytes: 14,
        };
        let a = for_agent("run-t2", 1, &gif, 16, 1024).await.unwrap();
        assert_eq!(a.data, gif.data);
        let bad = ImageData {
            mime: "image/png".into(),
            data: "bm90IGEgcG5n".into(),
            bytes: 2_000_000,
        };
        assert!(for_agent("run-t2", 2, &bad, 1568, 1024).await.is_none());
    }

    #[tokio::test]
    async fn an_image_over_the_byte_cap_shrinks_until_it_fits() {
        let img = png(1000, 1000);
        let a = for_agent("run-t3", 0, &img, 1568, 60_000).await.unwrap();
        assert!(a.bytes <= 60_000, "{}", a.bytes);
        assert_eq!(a.mime, "image/jpeg");
        assert!(a.scaled.is_some());
    }
}
