//! Whether the device is still there, and the keepalive that holds the
//! attachment (and detaches when the handle is dropped).

use std::io::Read;
use std::os::unix::net::UnixStream;

use enso_abi::control::LocalNic;

use super::Device;
use crate::error::DeviceError;

/// Keeps an attachment alive; detaches when dropped.
pub(super) enum Keepalive {
    /// Standalone device: the control connection (non-blocking); closing
    /// it detaches, and the device closing it means the device is gone.
    Socket(UnixStream),
    /// In-process threaded device: its handle, and our application id.
    Control(Box<dyn LocalNic + Send>, u32),
    /// Stepped engine: the caller detaches (or drops the engine).
    None,
}

impl Device {
    /// Whether the device is still there: for a standalone device (opened
    /// with [`Device::open`] or [`Device::open_in`]), [`DeviceError::Gone`]
    /// once it has closed the attachment, as its process does when it exits
    /// or is killed. A device that is gone completes nothing and delivers
    /// nothing, so a loop that may wait for traffic indefinitely should call
    /// this now and then (it is one non-blocking read of the control
    /// connection). An in-process device ([`Device::attach_nic`]) is gone
    /// once it is stopped or dropped. A stepped engine
    /// lives as long as its owner: always `Ok`.
    pub fn check_alive(&self) -> Result<(), DeviceError> {
        let s = match &self._keep {
            Keepalive::Socket(s) => s,
            Keepalive::Control(c, _) if !c.is_running() => return Err(DeviceError::Gone),
            Keepalive::Control(..) | Keepalive::None => return Ok(()),
        };
        let mut byte = [0u8; 1];
        match (&*s).read(&mut byte) {
            // End of stream: the device closed its end.
            Ok(0) => Err(DeviceError::Gone),
            // The protocol has the device send nothing after its answer;
            // whatever it sent does not say it is gone.
            Ok(_) => Ok(()),
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::Interrupted
                ) =>
            {
                Ok(())
            }
            // A reset connection (or any other failure of it).
            Err(_) => Err(DeviceError::Gone),
        }
    }

    /// The error for a wait that timed out: [`DeviceError::Gone`] if the
    /// device is gone (the usual reason), else `stall`.
    #[cold]
    pub(super) fn stalled(&self, stall: DeviceError) -> DeviceError {
        match self.check_alive() {
            Err(gone) => gone,
            Ok(()) => stall,
        }
    }
}

impl Drop for Device {
    fn drop(&mut self) {
        if let Keepalive::Control(c, id) = &self._keep {
            c.detach(*id);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::device::test_support::{answer, create_files, opts};
    use std::io::{BufRead, BufReader, Write};
    use std::os::unix::net::UnixListener;
    use std::time::Duration;

    #[test]
    fn check_alive_tells_when_the_device_closed_the_attachment() {
        let dir = tempfile::tempdir().expect("tempdir");
        let d = dir.path();
        let info = answer(d, "held");
        create_files(&info, info.dma_len);
        let devdir = d.join("enso-held");
        std::fs::create_dir_all(&devdir).expect("device dir");
        let l = UnixListener::bind(devdir.join(enso_abi::control::CONTROL_SOCKET)).expect("bind");
        // A device that holds the connection until told to go.
        let (go, gone) = std::sync::mpsc::channel::<()>();
        let device = std::thread::spawn(move || {
            let (mut s, _) = l.accept().expect("accept");
            let mut line = String::new();
            BufReader::new(&s).read_line(&mut line).expect("request");
            let resp = enso_abi::control::ControlResponse::Attached(info);
            let mut out = serde_json::to_string(&resp).expect("json");
            out.push('\n');
            s.write_all(out.as_bytes()).expect("answer");
            let _ = gone.recv();
        });
        let dev = Device::open_in(d, "held", opts()).expect("attach");
        assert_eq!(dev.check_alive(), Ok(()));
        std::thread::sleep(Duration::from_millis(20));
        assert_eq!(dev.check_alive(), Ok(()), "nothing to read is not gone");
        go.send(()).expect("device thread");
        device.join().expect("device thread");
        assert_eq!(dev.check_alive(), Err(DeviceError::Gone));
        assert_eq!(dev.check_alive(), Err(DeviceError::Gone), "and stays gone");
    }
}
