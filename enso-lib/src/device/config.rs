//! Configuration notifications: flow binding, fallback policy,
//! timestamping and rate limits.

use enso_abi::layout::config::{self, status};
use enso_abi::timestamp::TsFormat;

use super::liveness::Keepalive;
use super::{Device, FlowRule, RxPipe, TxRecord, Wait};
use crate::error::{ConfigError, DeviceError};
use crate::shared::rule_args;

/// Flow rules the NIC lets one application hold at once (a quarter of
/// its 8192-entry flow table); [`ConfigError::QuotaReached`] past it.
pub const MAX_FLOW_RULES: u32 = 2048;

impl Device {
    pub(crate) fn config_raw(&mut self, id: u32, args: [u64; 5]) -> Result<(), ConfigError> {
        self.config(id, args)
    }

    /// Sends a configuration notification (about `port` where that
    /// matters) and returns the NIC's answer, which it writes into the
    /// notification as it completes it: the call waits for that
    /// completion (the data path never does). On a device attached with
    /// [`Device::attach_engine`] (an engine its caller steps) nothing can
    /// move while this call waits, so there the call returns once the
    /// notification is posted, and only the NIC's counters
    /// (`reject_bad_config`) tell a refusal.
    pub(super) fn config_on(
        &mut self,
        id: u32,
        args: [u64; 5],
        port: u32,
    ) -> Result<(), ConfigError> {
        let slot = self.tx_slot()?;
        self.tx_notif(slot).fill_config(id, args, port);
        self.tx_commit(slot, TxRecord::Config);
        self.flush_tx()?;
        if matches!(self._keep, Keepalive::None) {
            return Ok(());
        }
        let mut wait = Wait::new();
        loop {
            let now = self.stamp.then(enso_abi::monotonic_ns);
            // SYNC POINT D (Acquire, in `completed`): pairs with the NIC's
            // Release store completing the slot; the status it wrote
            // before is visible. The slot is reused only once reaped, by
            // this handle, after this.
            if self.tx_notif(slot).completed(now) {
                break;
            }
            wait.check(self, DeviceError::TxStalled)?;
            std::hint::spin_loop();
        }
        match self.tx_notif(slot).config_status() {
            status::APPLIED => Ok(()),
            status::TABLE_FULL => Err(ConfigError::TableFull),
            status::QUOTA => Err(ConfigError::QuotaReached(MAX_FLOW_RULES)),
            status::NOT_OWNER => Err(ConfigError::NotOwner),
            status::NOT_BOUND => Err(ConfigError::NotBound),
            _ => Err(ConfigError::Refused),
        }
    }

    pub(super) fn config(&mut self, id: u32, args: [u64; 5]) -> Result<(), ConfigError> {
        self.config_on(id, args, 0)
    }

    /// Timestamping on `port`: with `Some(offset)`, frames this
    /// application sends on the port carry their 32-bit send time (ns,
    /// CLOCK_MONOTONIC, little-endian) at byte `offset` (0..=60), and
    /// frames the port writes into its pipes and queues carry the
    /// round-trip time (ns, little-endian) there instead. `None` turns it
    /// off. The setting is this application's alone (another's frames on
    /// the same port are never stamped) and ends when it detaches.
    /// [`Device::set_timestamping_as`] chooses the real NIC's format.
    pub fn set_timestamping(&mut self, port: u32, offset: Option<u8>) -> Result<(), ConfigError> {
        self.set_timestamping_as(port, offset, TsFormat::Native)
    }

    /// As [`Device::set_timestamping`], in `format`: [`TsFormat::Enso`]
    /// writes what the real Ensō NIC writes (big-endian counts of its
    /// 200 MHz clock, 5 ns a cycle), so code written for Ensō's
    /// `get_pkt_rtt` reads the round trips unchanged. [`crate::rtt_ns`]
    /// reads either.
    pub fn set_timestamping_as(
        &mut self,
        port: u32,
        offset: Option<u8>,
        format: TsFormat,
    ) -> Result<(), ConfigError> {
        if port as usize >= self.info.ports || offset.is_some_and(|o| o > 60) {
            return Err(ConfigError::BadValue);
        }
        let args = [
            offset.is_some() as u64,
            offset.unwrap_or(0) as u64,
            format.to_arg(),
            0,
            0,
        ];
        self.config_on(config::TIMESTAMP, args, port)?;
        Ok(())
    }

    /// Rate limit of what this application sends on `port` (another's
    /// sends are not held back; it ends when this one detaches): bursts of
    /// `num` flits every
    /// `den` cycles of the NIC's 200 MHz clock (the real NIC's limiter; 64 B
    /// line rate at 100 Gb/s is 744/1000). `None` removes the limit.
    pub fn set_rate_limit(
        &mut self,
        port: u32,
        limit: Option<(u32, u32)>,
    ) -> Result<(), ConfigError> {
        if port as usize >= self.info.ports || limit.is_some_and(|(n, d)| n == 0 || d == 0) {
            return Err(ConfigError::BadValue);
        }
        let (n, d) = limit.unwrap_or((0, 0));
        self.config_on(config::RATE_LIMIT, [n as u64, d as u64, 0, 0, 0], port)?;
        Ok(())
    }

    /// Steers traffic matching `rule` to `pipe`. Returns the NIC's answer:
    /// [`ConfigError::QuotaReached`] once this application holds
    /// [`MAX_FLOW_RULES`], [`ConfigError::TableFull`] when the flow's
    /// window of the NIC's table is full, [`ConfigError::NotOwner`] when
    /// another application holds the flow; a refused bind leaves nothing.
    pub fn bind(&mut self, pipe: impl Into<RxPipe>, rule: FlowRule) -> Result<(), ConfigError> {
        let id = self.pipe_id(pipe.into()).ok_or(ConfigError::ForeignPipe)?;
        self.config(config::FLOW_BIND, rule_args(&rule, id))?;
        Ok(())
    }

    /// Removes a binding made with [`Device::bind`]:
    /// [`ConfigError::NotBound`] if there is none,
    /// [`ConfigError::NotOwner`] if another application holds it.
    pub fn unbind(&mut self, pipe: impl Into<RxPipe>, rule: FlowRule) -> Result<(), ConfigError> {
        let id = self.pipe_id(pipe.into()).ok_or(ConfigError::ForeignPipe)?;
        self.config(config::FLOW_UNBIND, rule_args(&rule, id))?;
        Ok(())
    }

    /// Makes the NIC choose among the fallback pipes (and RSS queues) of
    /// `pipe`'s port by round robin (`true`) or by flow hash (`false`, the
    /// default). The policy is the port's: it holds for pipes added later,
    /// and for other applications' fallback pipes on that port. It does not
    /// make `pipe` a fallback pipe.
    pub fn set_fallback_round_robin(
        &mut self,
        pipe: impl Into<RxPipe>,
        rr: bool,
    ) -> Result<(), ConfigError> {
        let id = self.pipe_id(pipe.into()).ok_or(ConfigError::ForeignPipe)?;
        self.config(
            config::FALLBACK,
            [config::FALLBACK_POLICY, id as u64, rr as u64, 0, 0],
        )?;
        Ok(())
    }
}
