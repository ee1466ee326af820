// bench/java/LuceneChurn.java: the `lucene` workload of bench/workloads.sh.
//
//   java -cp BUILD:lucene-core-4.10.4.jar:lucene-analyzers-common-4.10.4.jar \
//     LuceneChurn DIR DOCS UPDATES RAM_MB MAX_SEGMENT_MB REFRESH COMMIT [SEED]
//
// A search engine's indexing node in miniature, shaped like Elasticsearch on
// Lucene 4.10 (Debian's liblucene4.10-java; compiled with javac at bench
// time, nothing downloaded): DOCS documents indexed once (ids 0..DOCS-1),
// then UPDATES updates of a uniformly random id (IndexWriter.updateDocument:
// the new version goes to a new segment, the old one is marked deleted and
// its bytes die when a merge rewrites or drops its segment). Every write
// reaches the file system through write()/pwrite() (FileOutputStream and
// FileChannel), none through a mapping: Lucene's MMapDirectory maps files to
// read them only.
//
// The write paths, each with its own lifetime:
//   - segment flushes (the RAM buffer, RAM_MB, full; and every REFRESH ops an
//     NRT reader reopen, as Elasticsearch's refresh, flushes a small
//     segment): compound files (.cfs) built from per-format files that are
//     deleted at once, short-lived small segments;
//   - merges (TieredMergePolicy, merged segments up to MAX_SEGMENT_MB; the
//     default ConcurrentMergeScheduler's background threads): the long-lived
//     data, rewritten again once enough of it is deleted. 5120 is Lucene's
//     and Elasticsearch's default (5 GB, above any index this driver
//     builds): the merges then grow segments tier by tier up to a large part
//     of the index, the biggest live far longer than a flush, as on a real
//     server (bench/workloads.sh passes it; a smaller cap, 32 up to
//     2026-11-28, keeps every merged segment small and short-lived);
//   - commits every COMMIT ops (segments_N, fsyncs; older commit points
//     deleted);
//   - a translog as Elasticsearch keeps one: every operation appended to
//     translog-GEN.tlog through a FileChannel, fsynced (fdatasync) per bulk of
//     BULK ops with its checkpoint (translog.ckp, 16 bytes rewritten in place
//     with a positional write, i.e. pwrite), and the generation deleted after
//     the next commit.
// The input is deterministic (java.util.Random seeded with SEED, default 42):
// the same documents, ids and text every run. When merges run and which
// segments they pick depends on thread timing, as in the real engine.
//
// Threads, as in a server: all the indexing (updateDocument, and with it the
// flushes of a full RAM buffer; the refreshes; the commits; the translog) runs
// on the one worker thread of an ExecutorService, one task per bulk of BULK
// operations, and the main thread only submits each bulk and waits for it,
// as Elasticsearch's write and flush thread pools, Solr's update handlers or
// Kafka's request handlers index on pool threads, never on the JVM's main
// thread. This matters to the JVM's native signatures (lucene-native,
// PCSTREAM_JAVA=0): a write through a JDK native has a native stack that
// ends where its thread started. Indexing on main (as this driver did up to
// 2026-11-28) ends flush writes in the launcher's JavaMain, merge writes in
// the JVM's thread entry (ConcurrentMergeScheduler's threads), so native
// signatures alone told flushes from merges there, and in no real server.
// On a pool thread both end in the same thread entry, and only the Java
// frames tell a flush from a merge. -DLuceneChurn.onMain=true indexes on
// the main thread instead (the driver's earlier shape, to compare).
import java.io.File;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.util.Random;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import org.apache.lucene.analysis.standard.StandardAnalyzer;
import org.apache.lucene.document.Document;
import org.apache.lucene.document.Field;
import org.apache.lucene.document.LongField;
import org.apache.lucene.document.NumericDocValuesField;
import org.apache.lucene.document.StringField;
import org.apache.lucene.document.TextField;
import org.apache.lucene.index.DirectoryReader;
import org.apache.lucene.index.IndexWriter;
import org.apache.lucene.index.IndexWriterConfig;
import org.apache.lucene.index.Term;
import org.apache.lucene.index.TieredMergePolicy;
import org.apache.lucene.store.Directory;
import org.apache.lucene.store.FSDirectory;
import org.apache.lucene.util.Version;

public final class LuceneChurn {
  static final int BULK = 500; // operations per bulk request (one translog fsync)
  static final int VOCABULARY = 50_000;

  public static void main(String[] args) throws IOException {
    if (args.length < 7 || args.length > 8) {
      usage("expected 7 or 8 arguments, got " + args.length);
    }
    File dir = new File(args[0]);
    int docs = (int) number(args[1], "DOCS", 1);
    long updates = number(args[2], "UPDATES", 0);
    double ramMb = number(args[3], "RAM_MB", 1);
    double maxSegMb = number(args[4], "MAX_SEGMENT_MB", 1);
    long refresh = number(args[5], "REFRESH", 1);
    long commit = number(args[6], "COMMIT", 1);
    long seed = args.length > 7 ? number(args[7], "SEED", Long.MIN_VALUE) : 42;
    if (!dir.isDirectory()) usage("DIR '" + args[0] + "' is not a directory");
    ExecutorService pool = Boolean.getBoolean("LuceneChurn.onMain") ? null
        : Executors.newSingleThreadExecutor(r -> new Thread(r, "lucene-write"));
    try {
      LuceneChurn c = on(pool, () -> new LuceneChurn(dir, seed, ramMb, maxSegMb, refresh, commit));
      for (int from = 0; from < docs; from += BULK) {
        int f = from, to = (int) Math.min((long) from + BULK, docs);
        on(pool, () -> c.indexAll(f, to));
      }
      for (long u = 0; u < updates; u += BULK) {
        long n = Math.min(BULK, updates - u);
        on(pool, () -> c.updateRandom(docs, n));
      }
      on(pool, c::finish);
    } finally {
      if (pool != null) pool.shutdown();
    }
  }

  /** Work that may throw an IOException, run on the worker thread. */
  interface Task<T> {
    T call() throws IOException;
  }

  interface VoidTask {
    void run() throws IOException;
  }

  static void on(ExecutorService pool, VoidTask t) throws IOException {
    on(pool, () -> {
      t.run();
      return null;
    });
  }

  /** Runs t on the pool's worker thread (on this thread without a pool) and waits for it. */
  static <T> T on(ExecutorService pool, Task<T> t) throws IOException {
    if (pool == null) return t.call();
    try {
      return pool.submit(() -> t.call()).get();
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new IOException("interrupted", e);
    } catch (ExecutionException e) {
      Throwable c = e.getCause();
      if (c instanceof IOException) throw (IOException) c;
      if (c instanceof RuntimeException) throw (RuntimeException) c;
      if (c instanceof Error) throw (Error) c;
      throw new IOException(c);
    }
  }

  static void usage(String why) {
    System.err.println("LuceneChurn: " + why
        + " (usage: LuceneChurn DIR DOCS UPDATES RAM_MB MAX_SEGMENT_MB REFRESH COMMIT [SEED])");
    System.exit(2);
  }

  /** A whole number >= min (DOCS at most Integer.MAX_VALUE), or a one-line error. */
  static long number(String s, String what, long min) {
    long v = 0;
    try {
      v = Long.parseLong(s);
    } catch (NumberFormatException e) {
      usage(what + " must be a whole number, got '" + s + "'");
    }
    if (v < min || (what.equals("DOCS") && v > Integer.MAX_VALUE)) {
      usage(what + " must be >= " + min + ", got " + s);
    }
    return v;
  }

  final Random rnd;
  final String[] words;
  final IndexWriter writer;
  final File dir;
  final long refreshOps;
  final long commitOps;
  DirectoryReader reader;
  Translog translog;
  long ops;
  long[] versions; // each id's last version (made by the first update bulk)

  LuceneChurn(File dir, long seed, double ramMb, double maxSegMb, long refreshOps,
      long commitOps) throws IOException {
    this.dir = dir;
    this.refreshOps = refreshOps;
    this.commitOps = commitOps;
    this.rnd = new Random(seed);
    this.words = new String[VOCABULARY];
    for (int i = 0; i < VOCABULARY; i++) {
      StringBuilder w = new StringBuilder();
      int len = 3 + rnd.nextInt(8);
      for (int j = 0; j < len; j++) w.append((char) ('a' + rnd.nextInt(26)));
      words[i] = w.toString();
    }
    File index = new File(dir, "index");
    Directory d = FSDirectory.open(index);
    IndexWriterConfig cfg = new IndexWriterConfig(Version.LUCENE_4_10_4, new StandardAnalyzer());
    cfg.setOpenMode(IndexWriterConfig.OpenMode.CREATE);
    cfg.setRAMBufferSizeMB(ramMb);
    TieredMergePolicy mp = new TieredMergePolicy();
    mp.setMaxMergedSegmentMB(maxSegMb);
    cfg.setMergePolicy(mp);
    writer = new IndexWriter(d, cfg);
    reader = DirectoryReader.open(writer, true);
    translog = new Translog(dir.toPath(), 1);
  }

  /** A word drawn with a skew (Zipf-like: the first words are the most frequent). */
  String word() {
    double u = rnd.nextDouble();
    return words[(int) (VOCABULARY * u * u * u)];
  }

  String text(int n) {
    StringBuilder b = new StringBuilder(n * 8);
    for (int i = 0; i < n; i++) {
      if (i > 0) b.append(' ');
      b.append(word());
    }
    return b.toString();
  }

  Document doc(int id, long version) {
    Document d = new Document();
    d.add(new StringField("id", Integer.toString(id), Field.Store.YES));
    d.add(new TextField("title", text(4 + rnd.nextInt(8)), Field.Store.YES));
    d.add(new TextField("body", text(60 + rnd.nextInt(120)), Field.Store.YES));
    d.add(new StringField("tag", "t" + rnd.nextInt(200), Field.Store.NO));
    d.add(new LongField("version", version, Field.Store.YES));
    d.add(new NumericDocValuesField("ts", ops));
    return d;
  }

  void index(int id, long version) throws IOException {
    Document d = doc(id, version);
    writer.updateDocument(new Term("id", Integer.toString(id)), d);
    translog.add(id, version, d.get("body"));
    ops++;
    if (ops % BULK == 0) translog.sync();
    if (ops % refreshOps == 0) refresh();
    if (ops % commitOps == 0) commit();
  }

  void refresh() throws IOException {
    DirectoryReader r = DirectoryReader.openIfChanged(reader, writer, true);
    if (r != null) {
      reader.close();
      reader = r;
    }
  }

  /** Elasticsearch's flush: a Lucene commit, then a fresh translog generation. */
  void commit() throws IOException {
    translog.sync();
    Translog next = new Translog(dir.toPath(), translog.gen + 1);
    writer.commit();
    translog.closeAndDelete();
    translog = next;
  }

  /** A bulk of first versions: ids from..to-1. */
  void indexAll(int from, int to) throws IOException {
    for (int id = from; id < to; id++) index(id, 1);
  }

  /** A bulk of n updates of uniformly random ids of 0..docs-1. */
  void updateRandom(int docs, long n) throws IOException {
    if (versions == null) {
      versions = new long[docs];
      java.util.Arrays.fill(versions, 1);
    }
    for (long u = 0; u < n; u++) {
      int id = rnd.nextInt(docs);
      index(id, ++versions[id]);
    }
  }

  /** The last commit, then everything closed and the last translog deleted. */
  void finish() throws IOException {
    commit();
    reader.close();
    writer.close();
    translog.closeAndDelete();
    System.out.println("LuceneChurn: " + ops + " operations");
  }

  /** Append-only operation log + a checkpoint overwritten in place (Elasticsearch's translog). */
  static final class Translog {
    final long gen;
    final Path file;
    final FileChannel log;
    final FileChannel ckp;
    ByteBuffer buf = ByteBuffer.allocate(1 << 16);

    Translog(Path dir, long gen) throws IOException {
      this.gen = gen;
      this.file = dir.resolve("translog-" + gen + ".tlog");
      log = FileChannel.open(file, StandardOpenOption.CREATE, StandardOpenOption.TRUNCATE_EXISTING,
          StandardOpenOption.WRITE);
      ckp = FileChannel.open(dir.resolve("translog.ckp"), StandardOpenOption.CREATE,
          StandardOpenOption.WRITE);
    }

    void add(int id, long version, String body) throws IOException {
      byte[] b = body.getBytes(StandardCharsets.UTF_8);
      if (buf.remaining() < b.length + 16) drain();
      if (buf.capacity() < b.length + 16) buf = ByteBuffer.allocate(b.length + 16);
      buf.putInt(id).putLong(version).putInt(b.length).put(b);
    }

    void drain() throws IOException {
      buf.flip();
      while (buf.hasRemaining()) log.write(buf);
      buf.clear();
    }

    void sync() throws IOException {
      drain();
      log.force(false);
      ByteBuffer c = ByteBuffer.allocate(16).putLong(gen).putLong(log.position());
      c.flip();
      while (c.hasRemaining()) ckp.write(c, c.position());
      ckp.force(false);
    }

    void closeAndDelete() throws IOException {
      if (!log.isOpen()) return;
      log.close();
      ckp.close();
      Files.deleteIfExists(file);
    }
  }
}
