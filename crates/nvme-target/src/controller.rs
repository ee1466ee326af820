//! Command execution: the controllers (created by Connect, their registers,
//! keep alive and I/O queues), Fabrics (Connect, Property Get/Set), the
//! checks every command passes ([`Queue::admit`]) and the dispatch of admin
//! commands ([`crate::admin`] holds their bodies: Identify, Get/Set
//! Features, Get Log Page, Directive Send/Receive; Keep Alive, Asynchronous
//! Event Request and Abort are here) and I/O commands ([`crate::nvm`]: Read,
//! Write with FDP or Streams placement, Flush, Dataset Management, Write
//! Zeroes, I/O Management Receive/Send). Transport-free: a command and its
//! host data in, a [`Reply`] out; `conn` moves the bytes.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU16, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use crate::admin::{directive_recv, directive_send, features, get_log, identify};
use crate::device::Device;
use crate::nvm::io;
pub use crate::nvm::WritePlan;
use crate::pages::{Identity, DISCOVERY_NQN};
use crate::pdu::Sqe;
use crate::store::Store;

/// Status values (SCT << 8 | SC), as Linux's `NVME_SC_*` spell them.
pub mod sc {
    /// Success.
    pub const SUCCESS: u16 = 0x000;
    /// Invalid command opcode.
    pub const INVALID_OPCODE: u16 = 0x001;
    /// Invalid field in command.
    pub const INVALID_FIELD: u16 = 0x002;
    /// Internal error.
    pub const INTERNAL: u16 = 0x006;
    /// Command sequence error.
    pub const CMD_SEQ: u16 = 0x00c;
    /// Invalid namespace or format.
    pub const INVALID_NS: u16 = 0x00b;
    /// Data SGL length invalid.
    pub const SGL_LENGTH: u16 = 0x00f;
    /// LBA out of range.
    pub const LBA_RANGE: u16 = 0x080;
    /// Invalid log page.
    pub const INVALID_LOG_PAGE: u16 = 0x109;
    /// Feature identifier not saveable.
    pub const FEATURE_NOT_SAVEABLE: u16 = 0x10d;
    /// Command interrupted (retry: a transient shortage of buffer space).
    pub const CMD_INTERRUPTED: u16 = 0x021;
    /// Connect: controller busy (no controller id free).
    pub const CONNECT_CTRL_BUSY: u16 = 0x181;
    /// Connect: invalid parameters.
    pub const CONNECT_INVALID_PARAM: u16 = 0x182;
    /// Do not retry.
    pub const DNR: u16 = 0x4000;
}

/// Opcodes.
pub mod op {
    /// Fabrics commands (Connect, Property Get/Set).
    pub const FABRICS: u8 = 0x7f;
    /// Admin: Get Log Page.
    pub const GET_LOG_PAGE: u8 = 0x02;
    /// Admin: Identify.
    pub const IDENTIFY: u8 = 0x06;
    /// Admin: Abort.
    pub const ABORT: u8 = 0x08;
    /// Admin: Set Features.
    pub const SET_FEATURES: u8 = 0x09;
    /// Admin: Get Features.
    pub const GET_FEATURES: u8 = 0x0a;
    /// Admin: Asynchronous Event Request.
    pub const AER: u8 = 0x0c;
    /// Admin: Keep Alive.
    pub const KEEP_ALIVE: u8 = 0x18;
    /// Admin: Directive Send.
    pub const DIR_SEND: u8 = 0x19;
    /// Admin: Directive Receive.
    pub const DIR_RECV: u8 = 0x1a;
    /// I/O: Flush.
    pub const FLUSH: u8 = 0x00;
    /// I/O: Write.
    pub const WRITE: u8 = 0x01;
    /// I/O: Read.
    pub const READ: u8 = 0x02;
    /// I/O: Write Zeroes.
    pub const WRITE_ZEROES: u8 = 0x08;
    /// I/O: Dataset Management.
    pub const DSM: u8 = 0x09;
    /// I/O: I/O Management Receive.
    pub const IO_MGMT_RECV: u8 = 0x12;
    /// I/O: I/O Management Send.
    pub const IO_MGMT_SEND: u8 = 0x1d;
    /// Fabrics command type: Property Set.
    pub const FCTYPE_PROP_SET: u8 = 0x00;
    /// Fabrics command type: Connect.
    pub const FCTYPE_CONNECT: u8 = 0x01;
    /// Fabrics command type: Property Get.
    pub const FCTYPE_PROP_GET: u8 = 0x04;
}

/// The answer to one command.
#[derive(Debug, Default)]
pub struct Reply {
    /// Status (SCT << 8 | SC, plus DNR).
    pub status: u16,
    /// Completion dwords 0–1.
    pub result: u64,
    /// Data for the host (C2H commands).
    pub data: Vec<u8>,
    /// No completion is sent now (an Asynchronous Event Request).
    pub deferred: bool,
}

impl Reply {
    pub(crate) fn ok() -> Reply {
        Reply::default()
    }
    pub(crate) fn status(status: u16) -> Reply {
        Reply {
            status: status | sc::DNR,
            ..Reply::default()
        }
    }
    pub(crate) fn data(data: Vec<u8>) -> Reply {
        Reply {
            data,
            ..Reply::default()
        }
    }
    pub(crate) fn result(result: u64) -> Reply {
        Reply {
            result,
            ..Reply::default()
        }
    }
}

/// Whether a command carries data from the host (opcode bits 1:0 = 01b; for
/// Fabrics commands the command type's).
pub fn host_to_ctrl(sqe: &Sqe) -> bool {
    let code = if sqe.opcode() == op::FABRICS {
        sqe.nsid() as u8
    } else {
        sqe.opcode()
    };
    code & 3 == 1
}

/// Controller registers.
#[derive(Debug, Default, Clone, Copy)]
struct Regs {
    cc: u32,
    csts: u32,
}

/// CC fields (NVMe Base 2.0 §3.1.4.5) and CSTS bits.
mod reg {
    pub const CC_EN: u32 = 1;
    pub fn css(cc: u32) -> u32 {
        (cc >> 4) & 7
    }
    pub fn mps(cc: u32) -> u32 {
        (cc >> 7) & 0xf
    }
    pub fn ams(cc: u32) -> u32 {
        (cc >> 11) & 7
    }
    pub fn shn(cc: u32) -> u32 {
        (cc >> 14) & 3
    }
    pub fn iosqes(cc: u32) -> u32 {
        (cc >> 16) & 0xf
    }
    pub fn iocqes(cc: u32) -> u32 {
        (cc >> 20) & 0xf
    }
    pub const CSTS_RDY: u32 = 1;
    /// Controller fatal status: an unsupported configuration was enabled.
    pub const CSTS_CFS: u32 = 2;
    pub const CSTS_SHST_DONE: u32 = 2 << 2;
    pub const CSTS_SHST: u32 = 3 << 2;
}

/// One controller: created by an admin-queue Connect, joined by I/O queues.
#[derive(Debug)]
pub struct Ctrl {
    /// Who it is.
    pub id: Identity,
    /// The host's NQN.
    pub hostnqn: String,
    regs: Mutex<Regs>,
    /// Number of queues granted (0-based, I/O SQs).
    pub(crate) queues: u16,
    /// Keep Alive Timeout in milliseconds (0: none), from the Connect or
    /// Set Features 0Fh.
    pub(crate) kato_ms: AtomicU32,
    born: Instant,
    /// When a queue of the controller last brought a command (ms after `born`).
    last_ms: AtomicU64,
    io: Mutex<IoQueues>,
    /// CC.EN and CSTS.RDY: commands other than Fabrics may run.
    ready: AtomicBool,
}

/// The I/O queues of a controller, so that they can be torn down with it.
#[derive(Debug, Default)]
struct IoQueues {
    /// The controller was deleted: no queue may join it.
    gone: bool,
    links: HashMap<u16, Arc<QueueLink>>,
}

/// Closes a queue's transport connection (shuts its socket down).
#[derive(Clone)]
pub struct Closer(pub Arc<dyn Fn() + Send + Sync>);

impl std::fmt::Debug for Closer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Closer")
    }
}

/// An I/O queue as its controller sees it.
#[derive(Debug)]
pub struct QueueLink {
    closed: AtomicBool,
    closer: Option<Closer>,
}

impl QueueLink {
    /// Tears the queue down: it takes no more commands and its connection
    /// is closed.
    fn close(&self) {
        if !self.closed.swap(true, Ordering::AcqRel) {
            if let Some(c) = &self.closer {
                (c.0)();
            }
        }
    }

    /// Whether the queue was torn down.
    pub fn is_closed(&self) -> bool {
        self.closed.load(Ordering::Acquire)
    }
}

impl Ctrl {
    fn io_queues(&self) -> MutexGuard<'_, IoQueues> {
        self.io.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A queue of the controller brought a command (any command, on any
    /// queue, keeps it alive: traffic-based keep alive, as Linux's nvmet).
    pub fn touch(&self) {
        self.last_ms
            .store(self.born.elapsed().as_millis() as u64, Ordering::Relaxed);
    }

    /// The Keep Alive Timeout (zero: none).
    pub fn kato(&self) -> Duration {
        Duration::from_millis(u64::from(self.kato_ms.load(Ordering::Relaxed)))
    }

    /// KATO and how long the controller has been idle, when it has been
    /// idle longer than KATO plus a grace of KATO (at least `grace`).
    pub fn keep_alive_expired(&self, grace: Duration) -> Option<(Duration, Duration)> {
        let kato = self.kato();
        if kato.is_zero() {
            return None;
        }
        let last = Duration::from_millis(self.last_ms.load(Ordering::Relaxed));
        let idle = self.born.elapsed().saturating_sub(last);
        (idle > kato + kato.max(grace)).then_some((kato, idle))
    }

    /// Whether the controller is enabled and ready (CC.EN and CSTS.RDY).
    pub fn is_ready(&self) -> bool {
        self.ready.load(Ordering::Acquire)
    }

    /// Property Set of CC, as Linux's nvmet (`nvmet_update_cc`): enabling
    /// checks the configuration (I/O queue entry sizes 64/16 bytes but on a
    /// discovery controller, 4 KiB pages, round robin, the NVM command set)
    /// and sets CSTS.RDY, or CSTS.CFS if it is not supported; disabling or
    /// a shutdown clears CC and RDY and tears down the I/O queues; a
    /// shutdown also flushes the device and reports itself complete.
    fn set_cc(&self, sh: &Shared, new: u32) {
        let (mut torn, mut shut) = (false, false);
        {
            let mut r = self.regs.lock().unwrap_or_else(|e| e.into_inner());
            let old = r.cc;
            r.cc = new;
            let clear = |r: &mut Regs| {
                r.csts &= !reg::CSTS_RDY;
                r.cc = 0;
            };
            if new & reg::CC_EN != 0 && old & reg::CC_EN == 0 {
                let sizes_ok =
                    self.id.discovery || (reg::iosqes(new) == 6 && reg::iocqes(new) == 4);
                let rest_ok =
                    reg::mps(new) == 0 && reg::ams(new) == 0 && matches!(reg::css(new), 0 | 6);
                r.csts = if sizes_ok && rest_ok {
                    reg::CSTS_RDY
                } else {
                    tracing::warn!(
                        cntlid = self.id.cntlid,
                        "CC {new:#x}: configuration not supported (CSTS.CFS)"
                    );
                    reg::CSTS_CFS
                };
                self.touch();
            }
            if new & reg::CC_EN == 0 && old & reg::CC_EN != 0 {
                clear(&mut r);
                torn = true;
            }
            if reg::shn(new) != 0 && reg::shn(old) == 0 {
                clear(&mut r);
                r.csts |= reg::CSTS_SHST_DONE;
                (torn, shut) = (true, true);
            }
            if reg::shn(new) == 0 && reg::shn(old) != 0 {
                r.csts &= !reg::CSTS_SHST;
            }
            let ready = r.cc & reg::CC_EN != 0 && r.csts & reg::CSTS_RDY != 0;
            self.ready.store(ready, Ordering::Release);
        }
        if torn {
            self.tear_down_io(false);
        }
        if shut {
            let _ = sh.dev().flush();
        }
    }

    /// Adds I/O queue `qid`, or the reply refusing it: the controller was
    /// deleted (invalid controller id), or queue `qid` is already connected
    /// (Command Sequence Error, as nvmet).
    fn join(&self, qid: u16, closer: Option<Closer>) -> Result<Arc<QueueLink>, Reply> {
        let mut io = self.io_queues();
        if io.gone {
            return Err(Reply {
                result: 1 << 16 | 16, // invalid CNTLID
                ..Reply::status(sc::CONNECT_INVALID_PARAM)
            });
        }
        if io.links.contains_key(&qid) {
            tracing::info!(
                cntlid = self.id.cntlid,
                "connect of I/O queue {qid} refused: it is connected"
            );
            return Err(Reply::status(sc::CMD_SEQ));
        }
        let link = Arc::new(QueueLink {
            closed: AtomicBool::new(false),
            closer,
        });
        io.links.insert(qid, link.clone());
        Ok(link)
    }

    /// Forgets I/O queue `qid` (its connection ended).
    fn leave(&self, qid: u16, link: &Arc<QueueLink>) {
        let mut io = self.io_queues();
        if io.links.get(&qid).is_some_and(|l| Arc::ptr_eq(l, link)) {
            io.links.remove(&qid);
        }
    }

    /// Tears down every I/O queue; `delete`: for good (no queue may join).
    fn tear_down_io(&self, delete: bool) {
        let links: Vec<_> = {
            let mut io = self.io_queues();
            io.gone |= delete;
            io.links.drain().map(|(_, l)| l).collect()
        };
        if !links.is_empty() {
            tracing::info!(
                cntlid = self.id.cntlid,
                "tearing down {} I/O queue(s)",
                links.len()
            );
        }
        for l in links {
            l.close();
        }
    }
}

/// State shared by every connection of a target.
#[derive(Debug)]
pub struct Shared {
    /// The namespace's model and counters.
    pub device: Mutex<Device>,
    /// The namespace's data (read and written without the device lock).
    pub store: Arc<Store>,
    /// Namespace size in logical blocks (fixed).
    pub nlb: u64,
    /// Reclaim unit handles (fixed).
    pub ruhs: u16,
    /// Subsystem NQN.
    pub subnqn: String,
    /// Address and port advertised in the discovery log.
    pub addr: String,
    /// Listening port.
    pub port: u16,
    ctrls: Mutex<HashMap<u16, Arc<Ctrl>>>,
    next_cntlid: AtomicU16,
}

impl Shared {
    /// A target's shared state.
    pub fn new(device: Device, subnqn: String, addr: String, port: u16) -> Shared {
        Shared {
            store: device.store(),
            nlb: device.nlb(),
            ruhs: device.ruhs(),
            device: Mutex::new(device),
            subnqn,
            addr,
            port,
            ctrls: Mutex::new(HashMap::new()),
            next_cntlid: AtomicU16::new(1),
        }
    }

    /// The device, even if a connection thread panicked while holding it.
    pub fn dev(&self) -> MutexGuard<'_, Device> {
        self.device.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Whether `n` blocks from `slba` are inside the namespace.
    pub fn in_range(&self, slba: u64, n: u64) -> bool {
        slba.checked_add(n).is_some_and(|e| e <= self.nlb)
    }

    /// Deletes a controller (its admin queue went away or its keep alive
    /// timeout expired): it is forgotten and its I/O queues are torn down.
    pub fn delete_ctrl(&self, ctrl: &Arc<Ctrl>) {
        {
            let mut map = self.ctrls.lock().unwrap_or_else(|e| e.into_inner());
            if map
                .get(&ctrl.id.cntlid)
                .is_some_and(|c| Arc::ptr_eq(c, ctrl))
            {
                map.remove(&ctrl.id.cntlid);
            }
        }
        ctrl.tear_down_io(true);
        tracing::info!(cntlid = ctrl.id.cntlid, "controller deleted");
    }
}

/// Properties (NVMe over Fabrics 1.1 §3.5 / Base 2.0 §3.1.4).
const PROP_CAP: u32 = 0x00;
const PROP_VS: u32 = 0x08;
const PROP_CC: u32 = 0x14;
const PROP_CSTS: u32 = 0x1c;

/// Controller ids are 1..=MAX_CNTLID (0xFFF0 and above are reserved).
const MAX_CNTLID: u16 = 0xffef;
/// CAP.MQES: the largest submission queue size (0-based) a Connect may ask.
pub const MQES: u16 = 127;
/// CAP: MQES, CQR, TO 2 s, CSS NVM, MPSMIN/MPSMAX 4 KiB.
const CAP: u64 = MQES as u64 | (1 << 16) | (4 << 24) | (1 << 37);
/// Most host data a command other than Write takes: Dataset Management's
/// 256 ranges (Linux always sends all 4 KiB), a page of feature, directive
/// or RUH update data.
pub const MAX_CMD_DATA: usize = 4096;
/// Host data of a Connect.
const CONNECT_DATA: usize = 1024;

/// One queue (one TCP connection) and what it is bound to.
#[derive(Debug, Default)]
pub struct Queue {
    /// Queue id (0 = admin).
    pub qid: u16,
    /// Submission queue size (0-based).
    pub sqsize: u16,
    /// The controller, once connected.
    pub ctrl: Option<Arc<Ctrl>>,
    /// Outstanding Asynchronous Event Requests (never completed: no events are raised).
    pub aers: Vec<u16>,
    /// An I/O queue's place in its controller (to be torn down with it).
    pub link: Option<Arc<QueueLink>>,
    /// Closes this queue's connection (given by the transport).
    pub closer: Option<Closer>,
}

impl Queue {
    /// A queue whose connection `closer` closes (when its controller tears
    /// it down).
    pub fn new(closer: Option<Closer>) -> Queue {
        Queue {
            closer,
            ..Queue::default()
        }
    }

    /// The queue's connection ended: an admin queue deletes its controller,
    /// an I/O queue leaves it.
    pub fn close(&mut self, sh: &Shared) {
        let Some(ctrl) = self.ctrl.take() else {
            return;
        };
        if self.qid == 0 {
            sh.delete_ctrl(&ctrl);
        } else if let Some(l) = self.link.take() {
            ctrl.leave(self.qid, &l);
        }
    }

    /// Whether this I/O queue was torn down by its controller.
    pub fn torn_down(&self) -> bool {
        self.link.as_ref().is_some_and(|l| l.is_closed())
    }

    /// Checks, before the transport asks for any host data or buffers it,
    /// that the command can run on this queue now and that `len` bytes of
    /// host data (the SGL length) are no more than it takes: an unknown
    /// opcode, a command before Connect and oversized data are refused
    /// here with the reply to send. [`Queue::execute`] checks it too.
    pub fn admit(&self, sqe: &Sqe, len: usize) -> Result<(), Reply> {
        let opcode = sqe.opcode();
        let max = if opcode == op::FABRICS {
            match sqe.nsid() as u8 {
                op::FCTYPE_CONNECT => CONNECT_DATA,
                op::FCTYPE_PROP_GET | op::FCTYPE_PROP_SET => 0,
                _ => return Err(Reply::status(sc::INVALID_OPCODE)),
            }
        } else {
            // Nothing but Fabrics before Connect, on a torn-down queue, or
            // while the controller is disabled or not ready (as nvmet, a
            // discovery controller is not checked for CC.EN).
            match &self.ctrl {
                Some(c) if !self.torn_down() && (c.is_ready() || c.id.discovery) => {}
                _ => return Err(Reply::status(sc::CMD_SEQ)),
            }
            match (self.qid == 0, opcode) {
                (true, op::IDENTIFY | op::GET_LOG_PAGE | op::KEEP_ALIVE | op::AER)
                | (true, op::ABORT | op::GET_FEATURES | op::DIR_RECV)
                | (false, op::READ | op::FLUSH | op::WRITE_ZEROES | op::IO_MGMT_RECV) => 0,
                (true, op::SET_FEATURES | op::DIR_SEND) | (false, op::DSM | op::IO_MGMT_SEND) => {
                    MAX_CMD_DATA
                }
                // Its length must be the blocks' (checked with its range).
                (false, op::WRITE) => usize::MAX,
                _ => return Err(Reply::status(sc::INVALID_OPCODE)),
            }
        };
        if host_to_ctrl(sqe) && len > max {
            return Err(Reply::status(sc::SGL_LENGTH));
        }
        Ok(())
    }

    /// Executes one command. `data` is the host's data for H2C commands.
    pub fn execute(&mut self, sh: &Shared, sqe: &Sqe, data: &[u8]) -> Reply {
        if let Err(r) = self.admit(sqe, data.len()) {
            return r;
        }
        if sqe.opcode() == op::FABRICS {
            return self.fabrics(sh, sqe, data);
        }
        let Some(ctrl) = self.ctrl.clone() else {
            return Reply::status(sc::CMD_SEQ);
        };
        if self.qid == 0 {
            self.admin(sh, &ctrl, sqe, data)
        } else {
            io(sh, &ctrl, sqe, data)
        }
    }

    fn fabrics(&mut self, sh: &Shared, sqe: &Sqe, data: &[u8]) -> Reply {
        match sqe.nsid() as u8 {
            op::FCTYPE_CONNECT => self.connect(sh, sqe, data),
            op::FCTYPE_PROP_GET | op::FCTYPE_PROP_SET if self.qid == 0 => {
                let Some(ctrl) = &self.ctrl else {
                    return Reply::status(sc::CMD_SEQ);
                };
                let offset = sqe.cdw(11);
                let regs = ctrl.regs.lock().unwrap_or_else(|e| e.into_inner());
                if sqe.nsid() as u8 == op::FCTYPE_PROP_GET {
                    match offset {
                        PROP_CAP => Reply::result(CAP),
                        PROP_VS => Reply::result(0x0002_0000),
                        PROP_CC => Reply::result(u64::from(regs.cc)),
                        PROP_CSTS => Reply::result(u64::from(regs.csts)),
                        _ => Reply::status(sc::INVALID_FIELD),
                    }
                } else if offset == PROP_CC {
                    drop(regs);
                    ctrl.set_cc(sh, sqe.cdw(12));
                    Reply::ok()
                } else {
                    Reply::status(sc::INVALID_FIELD)
                }
            }
            _ => Reply::status(sc::INVALID_OPCODE),
        }
    }

    fn connect(&mut self, sh: &Shared, sqe: &Sqe, data: &[u8]) -> Reply {
        if self.ctrl.is_some() || data.len() < 1024 {
            return Reply::status(sc::CONNECT_INVALID_PARAM);
        }
        let qid = (sqe.cdw(10) >> 16) as u16;
        let sqsize = sqe.cdw(11) as u16;
        let text = |at: usize| {
            let f = &data[at..at + 256];
            let end = f.iter().position(|&c| c == 0).unwrap_or(256);
            String::from_utf8_lossy(&f[..end]).into_owned()
        };
        let cntlid = u16::from_le_bytes([data[16], data[17]]);
        let subnqn = text(256);
        let hostnqn = text(512);
        let discovery = subnqn == DISCOVERY_NQN;
        if !discovery && subnqn != sh.subnqn {
            tracing::info!("connect to unknown subsystem {subnqn:?} refused");
            return Reply {
                result: 1 << 16 | 256, // IATTR 1: invalid data field at offset 256
                ..Reply::status(sc::CONNECT_INVALID_PARAM)
            };
        }
        if sqsize == 0 || sqsize > MQES {
            // As Linux's nvmet: IATTR 0, IPO 44 = SQSIZE in the command.
            tracing::info!("connect with SQSIZE {sqsize} refused (MQES {MQES})");
            return Reply {
                result: 44,
                ..Reply::status(sc::CONNECT_INVALID_PARAM)
            };
        }
        let ctrl = if qid == 0 {
            let mut map = sh.ctrls.lock().unwrap_or_else(|e| e.into_inner());
            // The next id not in use (the counter wraps past live controllers).
            let free = (0..MAX_CNTLID)
                .map(|_| sh.next_cntlid.fetch_add(1, Ordering::Relaxed) % MAX_CNTLID + 1)
                .find(|id| !map.contains_key(id));
            let Some(cntlid) = free else {
                return Reply::status(sc::CONNECT_CTRL_BUSY);
            };
            let ctrl = Arc::new(Ctrl {
                id: Identity {
                    subnqn: if discovery {
                        DISCOVERY_NQN.to_string()
                    } else {
                        sh.subnqn.clone()
                    },
                    serial: format!("PCS{:016x}", crate::fnv(sh.subnqn.as_bytes())),
                    cntlid,
                    discovery,
                },
                hostnqn,
                regs: Mutex::new(Regs::default()),
                queues: 63,
                kato_ms: AtomicU32::new(sqe.cdw(12)),
                born: Instant::now(),
                last_ms: AtomicU64::new(0),
                io: Mutex::new(IoQueues::default()),
                ready: AtomicBool::new(false),
            });
            map.insert(cntlid, ctrl.clone());
            drop(map);
            tracing::info!(cntlid, host = %ctrl.hostnqn, subsystem = %ctrl.id.subnqn, kato_ms = sqe.cdw(12), "controller created");
            ctrl
        } else {
            let found = sh
                .ctrls
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .get(&cntlid)
                .cloned();
            let invalid = Reply {
                result: 1 << 16 | 16, // invalid CNTLID
                ..Reply::status(sc::CONNECT_INVALID_PARAM)
            };
            match found {
                Some(c) if !c.id.discovery && c.hostnqn == hostnqn && qid <= c.queues + 1 => {
                    self.link = match c.join(qid, self.closer.clone()) {
                        Ok(link) => Some(link),
                        Err(r) => return r,
                    };
                    c.touch();
                    c
                }
                _ => return invalid,
            }
        };
        self.qid = qid;
        self.sqsize = sqsize;
        let cntlid = ctrl.id.cntlid;
        self.ctrl = Some(ctrl);
        Reply::result(u64::from(cntlid))
    }

    fn admin(&mut self, sh: &Shared, ctrl: &Ctrl, sqe: &Sqe, data: &[u8]) -> Reply {
        let disc = ctrl.id.discovery;
        match sqe.opcode() {
            op::IDENTIFY => identify(sh, ctrl, sqe),
            op::GET_LOG_PAGE => get_log(sh, disc, sqe),
            op::KEEP_ALIVE => Reply::ok(),
            op::AER => {
                if self.aers.len() >= 4 {
                    return Reply::status(0x105); // AER limit exceeded
                }
                self.aers.push(sqe.cid());
                Reply {
                    deferred: true,
                    ..Reply::ok()
                }
            }
            op::ABORT => Reply::result(1), // command not aborted
            op::GET_FEATURES => features(sh, ctrl, sqe, None),
            op::SET_FEATURES => features(sh, ctrl, sqe, Some(data)),
            op::DIR_RECV if !disc => directive_recv(sh, sqe),
            op::DIR_SEND if !disc => directive_send(sqe),
            _ => Reply::status(sc::INVALID_OPCODE),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::device::DeviceConfig;

    fn shared() -> Shared {
        let d = Device::new(DeviceConfig {
            capacity: 16 << 20,
            ruhs: 2,
            ru_size: 64 << 10,
            ..DeviceConfig::default()
        })
        .unwrap();
        Shared::new(d, crate::DEFAULT_NQN.into(), "127.0.0.1".into(), 4420)
    }

    /// Connects queue `qid` of controller `cntlid`: the queue and the reply.
    fn connect(sh: &Shared, qid: u16, cntlid: u16, host: &str) -> (Queue, Reply) {
        let mut q = Queue::default();
        let mut data = vec![0u8; 1024];
        data[16..18].copy_from_slice(&cntlid.to_le_bytes());
        data[256..256 + crate::DEFAULT_NQN.len()].copy_from_slice(crate::DEFAULT_NQN.as_bytes());
        data[512..512 + host.len()].copy_from_slice(host.as_bytes());
        let mut c = Sqe::new(op::FABRICS, 0, u32::from(op::FCTYPE_CONNECT));
        c.set(10, u32::from(qid) << 16).set(11, 31);
        let r = q.execute(sh, &c, &data);
        (q, r)
    }

    #[test]
    fn controller_ids_wrap_around_live_controllers() {
        let sh = shared();
        let (mut live, r) = connect(&sh, 0, 0xffff, "nqn.live");
        assert_eq!(r.status, 0);
        let id = r.result as u16;
        // 65,519 controllers later the counter comes back to the live id.
        sh.next_cntlid.store(0xffef + id - 1, Ordering::Relaxed);
        let (mut other, r) = connect(&sh, 0, 0xffff, "nqn.other");
        assert_eq!(r.status, 0);
        assert_eq!(r.result, u64::from(id) + 1, "the live id is skipped");
        // The live controller is still the one its host joins, before and
        // after the other one goes away.
        let (_, r) = connect(&sh, 1, id, "nqn.live");
        assert_eq!(r.status, 0);
        other.close(&sh);
        let (_, r) = connect(&sh, 2, id, "nqn.live");
        assert_eq!(r.status, 0);
        live.close(&sh);
        let (_, r) = connect(&sh, 3, id, "nqn.live");
        assert_eq!(r.status & 0x7ff, sc::CONNECT_INVALID_PARAM);
    }
}
