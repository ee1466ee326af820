// bench/java/H2Churn.java: the `h2` workload of bench/workloads.sh.
//
//   java -cp BUILD:h2.jar H2Churn DIR KEYS UPDATES COMMIT SYNC_EVERY COMPACT_EVERY FILL_RATE COMPACT_MB [SEED]
//
// A key-value store on H2's MVStore (Debian's libh2-java; compiled with javac
// at bench time, nothing downloaded), the storage engine under the H2
// database: one file, DIR/store.mv, of chunks. Every commit appends the
// pages that changed (a copy-on-write B-tree: the updated leaves and their
// parents) as one chunk, written with a positional FileChannel write
// (pwrite) into the first free space of the file; a chunk's space is free
// again once none of its pages is live, and is then overwritten. So data
// dies page by page inside the one file, and the file's free space is
// reused in place: the device sees overwrites of old chunks' blocks, not
// whole files deleted.
//
// The run, seeded (java.util.Random, SEED default 42: the same keys and
// values every run):
//   - fill: KEYS keys (0..KEYS-1, in order) with 1 KiB values, a commit
//     every COMMIT puts;
//   - churn: UPDATES puts of a fresh 1 KiB value with a hot/cold skew: 80% of
//     them to the hot fifth of the keys (the contiguous range 0..KEYS/5-1, so
//     the hot keys share leaves) and 20% to the other four fifths;
//   - a commit (MVStore.commit) every COMMIT puts, an fsync (MVStore.sync)
//     every SYNC_EVERY commits (a group commit): the regular writes, small
//     chunks of mostly hot leaves that die at the next commits;
//   - every COMPACT_EVERY commits a compaction: MVStore.compact(FILL_RATE,
//     COMPACT_MB MiB) marks the live pages of the chunks with the lowest fill
//     rate (while the store's fill rate is below FILL_RATE %) for rewriting,
//     and the commit (and fsync) that follows writes them into a new chunk: mostly
//     cold pages, long-lived; the old chunks' space becomes free and is
//     reused by the next commits.
// Deterministic: no background thread (autoCommitDisabled: no auto-commit,
// no background auto-compaction), retention time 0 (a chunk's space is
// reusable as soon as it is unused, not after 45 s of wall-clock time), no
// compression; the JVM runs one writing thread. Fails (exit 1) when no
// compaction rewrote a page or the file's space was never reused (bytes
// written under twice the file's size), so the workload cannot silently stop
// being what it claims.
import java.io.File;
import java.util.Random;
import org.h2.mvstore.FileStore;
import org.h2.mvstore.MVMap;
import org.h2.mvstore.MVStore;

public final class H2Churn {
  static final int VALUE = 1024;
  static final int KEYS_PER_PAGE = Integer.getInteger("h2churn.kpp", 8);

  public static void main(String[] args) {
    if (args.length < 8 || args.length > 9) {
      usage("expected 8 or 9 arguments, got " + args.length);
    }
    File dir = new File(args[0]);
    long keys = number(args[1], "KEYS", 10);
    long updates = number(args[2], "UPDATES", 0);
    long commit = number(args[3], "COMMIT", 1);
    long syncEvery = number(args[4], "SYNC_EVERY", 1);
    long compactEvery = number(args[5], "COMPACT_EVERY", 1);
    long fill = number(args[6], "FILL_RATE", 1);
    long compactMb = number(args[7], "COMPACT_MB", 1);
    long seed = args.length > 8 ? number(args[8], "SEED", Long.MIN_VALUE) : 42;
    if (!dir.isDirectory()) usage("DIR '" + args[0] + "' is not a directory");
    if (fill > 100) usage("FILL_RATE must be a percentage (1..100), got " + fill);
    if (keys > Integer.MAX_VALUE) usage("KEYS must be at most " + Integer.MAX_VALUE);
    if (compactMb > 1024) usage("COMPACT_MB must be at most 1024, got " + compactMb);
    new H2Churn(new File(dir, "store.mv"), seed, commit, syncEvery, compactEvery, (int) fill,
            (int) compactMb)
        .run(keys, updates);
  }

  static void usage(String why) {
    System.err.println("H2Churn: " + why
        + " (usage: H2Churn DIR KEYS UPDATES COMMIT SYNC_EVERY COMPACT_EVERY FILL_RATE COMPACT_MB"
        + " [SEED])");
    System.exit(2);
  }

  /** A whole number >= min, or a one-line error. */
  static long number(String s, String what, long min) {
    long v = 0;
    try {
      v = Long.parseLong(s);
    } catch (NumberFormatException e) {
      usage(what + " must be a whole number, got '" + s + "'");
    }
    if (v < min) usage(what + " must be >= " + min + ", got " + s);
    return v;
  }

  final Random rnd;
  final MVStore store;
  final MVMap<Long, byte[]> map;
  final long commitEvery, syncEvery, compactEvery;
  final int fillRate, compactBytes;
  long puts, commits, compactions, rewrites;

  H2Churn(File file, long seed, long commitEvery, long syncEvery, long compactEvery, int fillRate,
      int compactMb) {
    this.rnd = new Random(seed);
    this.commitEvery = commitEvery;
    this.syncEvery = syncEvery;
    this.compactEvery = compactEvery;
    this.fillRate = fillRate;
    this.compactBytes = compactMb << 20;
    file.delete();
    this.store = new MVStore.Builder().fileName(file.getPath()).autoCommitDisabled()
        .keysPerPage(KEYS_PER_PAGE).open();
    store.setRetentionTime(0);
    this.map = store.openMap("kv");
  }

  void put(long key) {
    byte[] v = new byte[VALUE];
    rnd.nextBytes(v);
    map.put(key, v);
    if (++puts % commitEvery == 0) {
      commit();
      if (commits % compactEvery == 0) compact();
    }
  }

  /**
   * A regular commit: the chunk of the pages changed since the last one; an
   * fsync every syncEvery commits.
   */
  void commit() {
    store.commit();
    if (++commits % syncEvery == 0) store.sync();
  }

  /**
   * A compaction: the live pages of the emptiest chunks (up to compactBytes),
   * rewritten by the commit that follows into a chunk of their own.
   */
  void compact() {
    long before = store.getFileStore().getWriteBytes();
    if (store.compact(fillRate, compactBytes)) {
      store.commit();
      store.sync();
      compactions++;
      rewrites += store.getFileStore().getWriteBytes() - before;
    }
  }

  void run(long keys, long updates) {
    long hot = Math.max(1, keys / 5);
    for (long k = 0; k < keys; k++) put(k);
    for (long i = 0; i < updates; i++) {
      long k = rnd.nextInt(5) < 4 ? (long) (rnd.nextDouble() * hot)
          : hot + (long) (rnd.nextDouble() * (keys - hot));
      put(k);
    }
    commit();
    store.sync();
    FileStore fs = store.getFileStore();
    long written = fs.getWriteBytes(), size = fs.size();
    int fillNow = store.getChunksFillRate(), fileFill = fs.getFillRate(), chunks = store.getChunkCount();
    store.close();
    System.out.println("H2Churn: " + puts + " puts, " + commits + " commits, " + compactions
        + " compactions rewrote " + (rewrites >> 20) + " MiB; wrote " + (written >> 20)
        + " MiB into a " + (size >> 20) + " MiB file (" + chunks + " chunks, " + fillNow
        + "% of their pages live; " + fileFill + "% of the file in chunks)");
    if (updates > 0 && compactions == 0) {
      System.err.println("H2Churn: no compaction rewrote anything (FILL_RATE " + fillRate
          + " too low for this run?)");
      System.exit(1);
    }
    if (updates > 0 && written < 2 * size) {
      System.err.println("H2Churn: wrote " + written + " bytes into a " + size
          + "-byte file: its space was not reused");
      System.exit(1);
    }
  }
}
