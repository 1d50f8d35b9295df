//! gbm-sys 0.4.0's bindings to libgbm, with libgbm loaded on first use instead of at start.
//!
//! Upstream links libgbm (and through it libdrm, libwayland-server, libexpat and libffi) into
//! every program that depends on it, so each start of the connector mapped and relocated six
//! libraries that only a Wayland DMA-BUF capture ever calls (0.2-0.35 MiB resident at idle,
//! measured). Here every function of libgbm is a Rust function of the same signature that
//! opens `libgbm.so.1` the first time any of them runs (libloading), so only a capture that
//! needs it pays for it. Without libgbm, `gbm_create_device` fails (null, `ENOENT`) as on a
//! machine without a GPU; every other function the gbm crate calls takes a device or a buffer
//! made by one, so none is reached then. Types and constants are upstream's, unchanged
//! (`bindings.rs`).

#![allow(non_camel_case_types, non_upper_case_globals)]
#![allow(
    clippy::missing_safety_doc,
    clippy::too_many_arguments,
    reason = "the functions are libgbm's own, with its C signatures and contracts"
)]

include!("bindings.rs");

mod lazy;

lazy::functions! {
    fn gbm_device_get_fd(gbm: *mut gbm_device) -> libc::c_int;
    fn gbm_device_get_backend_name(gbm: *mut gbm_device) -> *const libc::c_char;
    fn gbm_device_is_format_supported(gbm: *mut gbm_device, format: u32, flags: u32) -> libc::c_int;
    fn gbm_device_get_format_modifier_plane_count(gbm: *mut gbm_device, format: u32, modifier: u64) -> libc::c_int;
    fn gbm_device_destroy(gbm: *mut gbm_device);
    fn gbm_create_device(fd: libc::c_int) -> *mut gbm_device => no_device();
    fn gbm_bo_create(gbm: *mut gbm_device, width: u32, height: u32, format: u32, flags: u32) -> *mut gbm_bo;
    fn gbm_bo_create_with_modifiers(gbm: *mut gbm_device, width: u32, height: u32, format: u32, modifiers: *const u64, count: libc::c_uint) -> *mut gbm_bo;
    fn gbm_bo_create_with_modifiers2(gbm: *mut gbm_device, width: u32, height: u32, format: u32, modifiers: *const u64, count: libc::c_uint, flags: u32) -> *mut gbm_bo;
    fn gbm_bo_import(gbm: *mut gbm_device, type_: u32, buffer: *mut libc::c_void, flags: u32) -> *mut gbm_bo;
    fn gbm_bo_map(bo: *mut gbm_bo, x: u32, y: u32, width: u32, height: u32, flags: u32, stride: *mut u32, map_data: *mut *mut libc::c_void) -> *mut libc::c_void;
    fn gbm_bo_unmap(bo: *mut gbm_bo, map_data: *mut libc::c_void);
    fn gbm_bo_get_width(bo: *mut gbm_bo) -> u32;
    fn gbm_bo_get_height(bo: *mut gbm_bo) -> u32;
    fn gbm_bo_get_stride(bo: *mut gbm_bo) -> u32;
    fn gbm_bo_get_stride_for_plane(bo: *mut gbm_bo, plane: libc::c_int) -> u32;
    fn gbm_bo_get_format(bo: *mut gbm_bo) -> u32;
    fn gbm_bo_get_bpp(bo: *mut gbm_bo) -> u32;
    fn gbm_bo_get_offset(bo: *mut gbm_bo, plane: libc::c_int) -> u32;
    fn gbm_bo_get_device(bo: *mut gbm_bo) -> *mut gbm_device;
    fn gbm_bo_get_handle(bo: *mut gbm_bo) -> gbm_bo_handle;
    fn gbm_bo_get_fd(bo: *mut gbm_bo) -> libc::c_int;
    fn gbm_bo_get_modifier(bo: *mut gbm_bo) -> u64;
    fn gbm_bo_get_plane_count(bo: *mut gbm_bo) -> libc::c_int;
    fn gbm_bo_get_handle_for_plane(bo: *mut gbm_bo, plane: libc::c_int) -> gbm_bo_handle;
    fn gbm_bo_get_fd_for_plane(bo: *mut gbm_bo, plane: libc::c_int) -> libc::c_int;
    fn gbm_bo_write(bo: *mut gbm_bo, buf: *const libc::c_void, count: usize) -> libc::c_int;
    fn gbm_bo_set_user_data(bo: *mut gbm_bo, data: *mut libc::c_void, destroy_user_data: ::std::option::Option< unsafe extern "C" fn(arg1: *mut gbm_bo, arg2: *mut libc::c_void), >);
    fn gbm_bo_get_user_data(bo: *mut gbm_bo) -> *mut libc::c_void;
    fn gbm_bo_destroy(bo: *mut gbm_bo);
    fn gbm_surface_create(gbm: *mut gbm_device, width: u32, height: u32, format: u32, flags: u32) -> *mut gbm_surface;
    fn gbm_surface_create_with_modifiers(gbm: *mut gbm_device, width: u32, height: u32, format: u32, modifiers: *const u64, count: libc::c_uint) -> *mut gbm_surface;
    fn gbm_surface_create_with_modifiers2(gbm: *mut gbm_device, width: u32, height: u32, format: u32, modifiers: *const u64, count: libc::c_uint, flags: u32) -> *mut gbm_surface;
    fn gbm_surface_lock_front_buffer(surface: *mut gbm_surface) -> *mut gbm_bo;
    fn gbm_surface_release_buffer(surface: *mut gbm_surface, bo: *mut gbm_bo);
    fn gbm_surface_has_free_buffers(surface: *mut gbm_surface) -> libc::c_int;
    fn gbm_surface_destroy(surface: *mut gbm_surface);
    fn gbm_format_get_name(gbm_format: u32, desc: *mut gbm_format_name_desc) -> *mut libc::c_char;
}

/// What `gbm_create_device` answers when libgbm cannot be loaded: no device, with an errno
/// that says why, as the `gbm` crate reads it.
fn no_device() -> *mut gbm_device {
    set_errno(libc::ENOENT);
    std::ptr::null_mut()
}

#[cfg(target_os = "linux")]
fn set_errno(code: libc::c_int) {
    // SAFETY: __errno_location points at this thread's errno, valid for the thread's life.
    unsafe { *libc::__errno_location() = code }
}

#[cfg(not(target_os = "linux"))]
fn set_errno(_code: libc::c_int) {}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use std::os::fd::AsRawFd;

    fn maps_libgbm() -> bool {
        std::fs::read_to_string("/proc/self/maps")
            .unwrap()
            .contains(crate::lazy::LIBRARY)
    }

    /// libgbm is not mapped until a function of it runs, and is then; a device it cannot
    /// make (from /dev/null, not a DRM node) is a null pointer, not a crash.
    #[test]
    fn libgbm_is_loaded_by_the_first_call() {
        assert!(!maps_libgbm(), "libgbm was mapped before any call");
        let null = std::fs::File::open("/dev/null").unwrap();
        // SAFETY: a valid descriptor; a device made from it is destroyed at once.
        let device = unsafe { super::gbm_create_device(null.as_raw_fd()) };
        assert!(
            maps_libgbm(),
            "{} did not load; install libgbm1 (scripts/setup does)",
            crate::lazy::LIBRARY
        );
        if !device.is_null() {
            // SAFETY: made by gbm_create_device above and not used after.
            unsafe { super::gbm_device_destroy(device) };
        }
    }

    /// Without libgbm, device creation fails the way the gbm crate reports: null, and an
    /// errno that reads "not found".
    #[test]
    fn no_library_means_no_device_and_not_found() {
        let device = super::no_device();
        assert!(device.is_null());
        assert_eq!(
            std::io::Error::last_os_error().kind(),
            std::io::ErrorKind::NotFound
        );
    }
}
