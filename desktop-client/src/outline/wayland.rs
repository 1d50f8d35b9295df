//! The outline on a Wayland compositor with the wlr layer shell (sway, Hyprland, river, labwc):
//! an overlay-layer surface on the target's output, the frame drawn into a shared-memory buffer
//! with a transparent inside, and an empty input region, so the target shows through and every
//! click reaches it.
//!
//! Display-global pixels (as captures and window bounds give them, see
//! `local_core::desktop::wayland`) are turned into the output's surface-local logical
//! coordinates; the buffer has the output's integer scale, so the frame's edges fall on the
//! same physical pixels as on X11.
//! A Wayland client cannot see clicks given to other clients, so this backend reports only that
//! its surface was closed ([`Outline::sees_clicks`] is false): the guidance window reads the
//! target window's controls twice a second instead, and removes the outline once the target
//! changed or went away.

use std::io::Write as _;
use std::os::fd::AsFd as _;

use eframe::egui;
use local_core::a11y::ScreenRect;
use wayland_client::globals::{GlobalList, GlobalListContents, registry_queue_init};
use wayland_client::protocol::{
    wl_buffer, wl_compositor, wl_output, wl_region, wl_registry, wl_shm, wl_shm_pool, wl_surface,
};
use wayland_client::{Connection, Dispatch, EventQueue, Proxy as _, QueueHandle, delegate_noop};
use wayland_protocols_wlr::layer_shell::v1::client::{
    zwlr_layer_shell_v1::{self, ZwlrLayerShellV1},
    zwlr_layer_surface_v1::{self, ZwlrLayerSurfaceV1},
};

use super::{COLOUR, Outline, Seen, TITLE, bars, outer};
use crate::problem::Problem;

/// The layer shell's registry name.
pub const LAYER_SHELL: &str = "zwlr_layer_shell_v1";

/// How many round trips the compositor gets to configure a new surface.
const CONFIGURE_TRIES: usize = 5;

/// The sentence shown when the compositor cannot draw above other windows.
pub const NO_LAYER_SHELL: &str = "This Wayland compositor cannot show a frame above other windows (it has no layer shell), so the target will be framed on the capture in this window instead; sway, Hyprland, river, labwc and KDE Plasma show it on screen";

/// What the compositor said about the surface shown.
#[derive(Debug, Default)]
struct State {
    /// The serial of the last configure not yet acknowledged.
    configure: Option<u32>,
    /// The compositor closed the surface (its output went away).
    closed: bool,
}

/// The frame on screen and what keeps it there.
struct Shown {
    surface: wl_surface::WlSurface,
    layer: ZwlrLayerSurfaceV1,
    pool: wl_shm_pool::WlShmPool,
    buffer: wl_buffer::WlBuffer,
    output: wl_output::WlOutput,
}

/// Where a frame goes on one output.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Placement {
    /// The surface's top-left corner in the output's logical coordinates.
    pub logical: (i32, i32),
    /// The surface's size in logical pixels.
    pub size: (u32, u32),
    /// The buffer scale (physical pixels per logical pixel).
    pub scale: u32,
    /// The frame's outer rectangle inside the buffer, `[x, y, width, height]`, in physical
    /// pixels.
    pub frame: [u32; 4],
}

/// Places the frame around `target` (display-global physical pixels) on an output at
/// `origin` (display-global physical pixels) of integer `scale`: the surface is the frame's
/// outer rectangle rounded out to whole logical pixels.
#[must_use]
pub fn place(target: ScreenRect, origin: (i64, i64), scale: u32) -> Placement {
    let scale = scale.max(1);
    let s = i64::from(scale);
    let frame = outer(target);
    let left = i64::from(frame.x) - origin.0;
    let top = i64::from(frame.y) - origin.1;
    let right = left + i64::from(frame.width);
    let bottom = top + i64::from(frame.height);
    let (lx, ly) = (left.div_euclid(s), top.div_euclid(s));
    let (lr, lb) = (ceil_div(right, s), ceil_div(bottom, s));
    let int = |v: i64| i32::try_from(v).unwrap_or(if v < 0 { i32::MIN } else { i32::MAX });
    let uint = |v: i64| u32::try_from(v.max(1)).unwrap_or(u32::MAX);
    Placement {
        logical: (int(lx), int(ly)),
        size: (uint(lr - lx), uint(lb - ly)),
        scale,
        frame: [
            u32::try_from(left - lx * s).unwrap_or(0),
            u32::try_from(top - ly * s).unwrap_or(0),
            frame.width,
            frame.height,
        ],
    }
}

impl Placement {
    /// The buffer's size in physical pixels.
    #[must_use]
    pub fn buffer(&self) -> (u32, u32) {
        (self.size.0 * self.scale, self.size.1 * self.scale)
    }

    /// The buffer's pixels, ARGB8888 little-endian (B, G, R, A bytes), premultiplied: the
    /// frame's bars opaque in [`COLOUR`], everything else transparent.
    #[must_use]
    pub fn pixels(&self) -> Vec<u8> {
        let (width, height) = self.buffer();
        let mut pixels = vec![0u8; width as usize * height as usize * 4];
        let [r, g, b] = COLOUR;
        let [fx, fy, fw, fh] = self.frame;
        for [bx, by, bw, bh] in bars(fw, fh) {
            for y in (fy + by)..(fy + by + bh).min(height) {
                for x in (fx + bx)..(fx + bx + bw).min(width) {
                    let at = (y as usize * width as usize + x as usize) * 4;
                    pixels[at..at + 4].copy_from_slice(&[b, g, r, 255]);
                }
            }
        }
        pixels
    }
}

fn ceil_div(v: i64, s: i64) -> i64 {
    -((-v).div_euclid(s))
}

/// The layer-shell outline: its own connection to the compositor, at most one surface.
pub struct WaylandOutline {
    conn: Connection,
    queue: EventQueue<State>,
    state: State,
    globals: GlobalList,
    compositor: wl_compositor::WlCompositor,
    shm: wl_shm::WlShm,
    layer_shell: ZwlrLayerShellV1,
    shown: Option<Shown>,
}

fn no_outline(detail: impl std::fmt::Display) -> Problem {
    Problem::new(
        "The outline cannot be drawn on this Wayland desktop: follow the instruction by hand, and start MSGuide again once the compositor runs normally",
        Some(detail.to_string()),
    )
}

fn lost(detail: impl std::fmt::Display) -> Problem {
    Problem::new(
        "The connection to the Wayland compositor broke, so the outline cannot be drawn: close MSGuide and start it again",
        Some(detail.to_string()),
    )
}

impl WaylandOutline {
    /// Connects to the compositor named by `WAYLAND_DISPLAY`.
    ///
    /// # Errors
    /// A [`Problem`] when the compositor cannot be reached, or has no layer shell
    /// ([`NO_LAYER_SHELL`]).
    pub fn open() -> Result<Self, Problem> {
        let conn = Connection::connect_to_env().map_err(no_outline)?;
        let (globals, queue) = registry_queue_init::<State>(&conn).map_err(no_outline)?;
        let qh = queue.handle();
        let layer_shell = globals
            .bind::<ZwlrLayerShellV1, _, _>(&qh, 1..=4, ())
            .map_err(|e| Problem::new(NO_LAYER_SHELL, Some(e.to_string())))?;
        let compositor = globals
            .bind::<wl_compositor::WlCompositor, _, _>(&qh, 1..=4, ())
            .map_err(no_outline)?;
        let shm = globals
            .bind::<wl_shm::WlShm, _, _>(&qh, 1..=1, ())
            .map_err(no_outline)?;
        Ok(Self {
            conn,
            queue,
            state: State::default(),
            globals,
            compositor,
            shm,
            layer_shell,
            shown: None,
        })
    }

    /// Binds the output whose registry name is `name`.
    fn output(&self, name: u32) -> Result<wl_output::WlOutput, Problem> {
        let version = self.globals.contents().with_list(|list| {
            list.iter()
                .find(|g| g.name == name && g.interface == "wl_output")
                .map(|g| g.version)
        });
        let version = version.ok_or_else(|| no_outline("the target's output went away"))?;
        Ok(self.globals.registry().bind::<wl_output::WlOutput, _, _>(
            name,
            version.min(4),
            &self.queue.handle(),
            (),
        ))
    }

    fn create(&mut self, target: ScreenRect) -> Result<Shown, Problem> {
        let displays = local_core::desktop::wayland::displays().map_err(lost)?;
        let inside = |d: &local_core::desktop::Display| {
            let (x, y) = (i64::from(target.x), i64::from(target.y));
            (d.rect.x..d.rect.x + i64::try_from(d.rect.width).unwrap_or(i64::MAX)).contains(&x)
                && (d.rect.y..d.rect.y + i64::try_from(d.rect.height).unwrap_or(i64::MAX))
                    .contains(&y)
        };
        let display = displays
            .iter()
            .find(|d| inside(d))
            .or_else(|| displays.first())
            .ok_or_else(|| no_outline("the compositor shows no output"))?;
        // Buffer scales are whole numbers; a fractional output gets the next one up.
        let scale = display.scale.ceil().clamp(1.0, 16.0) as u32;
        let placement = place(target, (display.rect.x, display.rect.y), scale);
        let output = self.output(display.os_id)?;
        let qh = self.queue.handle();

        let surface = self.compositor.create_surface(&qh, ());
        // An empty input region: every click goes to whatever is below, the target first.
        let region = self.compositor.create_region(&qh, ());
        surface.set_input_region(Some(&region));
        region.destroy();
        let layer = self.layer_shell.get_layer_surface(
            &surface,
            Some(&output),
            zwlr_layer_shell_v1::Layer::Overlay,
            TITLE.to_owned(),
            &qh,
            (),
        );
        layer.set_anchor(zwlr_layer_surface_v1::Anchor::Top | zwlr_layer_surface_v1::Anchor::Left);
        let (lx, ly) = placement.logical;
        layer.set_margin(ly, 0, 0, lx);
        layer.set_size(placement.size.0, placement.size.1);
        // Placed against the whole output, not moved aside by panels' exclusive zones.
        layer.set_exclusive_zone(-1);
        layer.set_keyboard_interactivity(zwlr_layer_surface_v1::KeyboardInteractivity::None);
        surface.commit();
        self.state = State::default();
        for _ in 0..CONFIGURE_TRIES {
            if self.state.configure.is_some() || self.state.closed {
                break;
            }
            self.queue.roundtrip(&mut self.state).map_err(lost)?;
        }
        let serial = self
            .state
            .configure
            .take()
            .ok_or_else(|| no_outline("the compositor did not place the outline's surface"))?;
        layer.ack_configure(serial);

        let (width, height) = placement.buffer();
        let pixels = placement.pixels();
        let mut file = memfd(pixels.len()).map_err(no_outline)?;
        file.write_all(&pixels).map_err(no_outline)?;
        let side = |v: u32| i32::try_from(v).unwrap_or(i32::MAX);
        let pool = self.shm.create_pool(
            file.as_fd(),
            i32::try_from(pixels.len()).map_err(no_outline)?,
            &qh,
            (),
        );
        let buffer = pool.create_buffer(
            0,
            side(width),
            side(height),
            side(width * 4),
            wl_shm::Format::Argb8888,
            &qh,
            (),
        );
        surface.set_buffer_scale(side(scale));
        surface.attach(Some(&buffer), 0, 0);
        surface.damage_buffer(0, 0, side(width), side(height));
        surface.commit();
        self.queue.roundtrip(&mut self.state).map_err(lost)?;
        Ok(Shown {
            surface,
            layer,
            pool,
            buffer,
            output,
        })
    }
}

/// An anonymous in-memory file of `len` bytes for the buffer, written through `write` (no
/// mapping, which would need unsafe code).
fn memfd(len: usize) -> std::io::Result<std::fs::File> {
    let fd = rustix::fs::memfd_create("msguide-outline", rustix::fs::MemfdFlags::CLOEXEC)?;
    let file = std::fs::File::from(fd);
    file.set_len(u64::try_from(len).unwrap_or(u64::MAX))?;
    Ok(file)
}

impl Outline for WaylandOutline {
    fn show(&mut self, target: ScreenRect, _window: u32) -> Result<(), Problem> {
        self.hide();
        let shown = self.create(target)?;
        self.shown = Some(shown);
        Ok(())
    }

    fn sees_clicks(&self) -> bool {
        false
    }

    fn hide(&mut self) {
        let Some(shown) = self.shown.take() else {
            return;
        };
        shown.layer.destroy();
        shown.surface.destroy();
        shown.buffer.destroy();
        shown.pool.destroy();
        if shown.output.version() >= 3 {
            shown.output.release();
        }
        // Failures here mean the connection is gone, and the surface with it.
        let _ = self.conn.flush();
    }

    fn poll(&mut self, _ctx: &egui::Context) -> Vec<Seen> {
        // Read what the compositor sent without waiting, so its messages never pile up.
        let _ = self.conn.flush();
        if let Some(guard) = self.queue.prepare_read() {
            let _ = guard.read();
        }
        let _ = self.queue.dispatch_pending(&mut self.state);
        if let Some(serial) = self.state.configure.take()
            && let Some(shown) = &self.shown
        {
            shown.layer.ack_configure(serial);
            shown.surface.commit();
        }
        if self.shown.is_some() && std::mem::take(&mut self.state.closed) {
            vec![Seen::TargetChanged]
        } else {
            Vec::new()
        }
    }
}

impl Drop for WaylandOutline {
    fn drop(&mut self) {
        self.hide();
    }
}

impl Dispatch<ZwlrLayerSurfaceV1, ()> for State {
    fn event(
        state: &mut Self,
        _: &ZwlrLayerSurfaceV1,
        event: zwlr_layer_surface_v1::Event,
        (): &(),
        _: &Connection,
        _: &QueueHandle<Self>,
    ) {
        match event {
            zwlr_layer_surface_v1::Event::Configure { serial, .. } => {
                state.configure = Some(serial);
            }
            zwlr_layer_surface_v1::Event::Closed => state.closed = true,
            _ => {}
        }
    }
}

impl Dispatch<wl_registry::WlRegistry, GlobalListContents> for State {
    fn event(
        _: &mut Self,
        _: &wl_registry::WlRegistry,
        _: wl_registry::Event,
        _: &GlobalListContents,
        _: &Connection,
        _: &QueueHandle<Self>,
    ) {
    }
}

delegate_noop!(State: wl_compositor::WlCompositor);
delegate_noop!(State: wl_region::WlRegion);
delegate_noop!(State: wl_shm_pool::WlShmPool);
delegate_noop!(State: ZwlrLayerShellV1);
delegate_noop!(State: ignore wl_shm::WlShm);
delegate_noop!(State: ignore wl_buffer::WlBuffer);
delegate_noop!(State: ignore wl_surface::WlSurface);
delegate_noop!(State: ignore wl_output::WlOutput);

#[cfg(test)]
mod tests {
    use super::*;

    const TARGET: ScreenRect = ScreenRect {
        x: 101,
        y: 50,
        width: 80,
        height: 24,
    };

    #[test]
    fn at_scale_one_the_surface_is_the_frame() {
        let p = place(TARGET, (0, 0), 1);
        assert_eq!(p.logical, (98, 47));
        assert_eq!(p.size, (86, 30));
        assert_eq!(p.frame, [0, 0, 86, 30]);
    }

    #[test]
    fn at_scale_two_the_frame_keeps_its_physical_pixels() {
        // The frame's outer box is x 98..184, y 47..77 physical: logical 49..92, 23..39.
        let p = place(TARGET, (0, 0), 2);
        assert_eq!(p.logical, (49, 23));
        assert_eq!(p.size, (43, 16));
        assert_eq!(p.buffer(), (86, 32));
        assert_eq!(p.frame, [0, 1, 86, 30]);
        let pixels = p.pixels();
        let alpha = |x: u32, y: u32| pixels[((y * 86 + x) * 4 + 3) as usize];
        assert_eq!(alpha(0, 0), 0, "the row above the frame is transparent");
        assert_eq!(alpha(0, 1), 255);
        assert_eq!(alpha(40, 3), 255);
        assert_eq!(alpha(40, 4), 0, "the inside is transparent");
        assert_eq!(alpha(85, 20), 255);
    }

    #[test]
    fn a_second_output_is_placed_against_its_own_origin() {
        let p = place(TARGET, (-100, 40), 1);
        assert_eq!(p.logical, (198, 7));
    }
}
