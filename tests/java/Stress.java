import java.io.*;
import java.nio.ByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.file.*;
import java.util.*;
import java.util.concurrent.*;
import java.util.zip.CRC32;

/**
 * The shim inside a busy JVM (tests/tests/java_paths.rs): THREADS writers
 * (platform threads, and virtual threads where the JDK has them) write
 * files through FileOutputStream, RandomAccessFile, FileChannel and a
 * BufferedWriter, while every thread also allocates garbage (GC pressure
 * under a small heap).
 *   Stress DIR THREADS complete: the writers finish; prints the CRC-32 of
 *     every file, sorted by name (the output must not depend on the shim).
 *   Stress DIR THREADS exit: System.exit(0) while the writers are writing.
 */
public class Stress {
    static volatile Object sink;

    static byte[] block(int seed, int n) {
        byte[] b = new byte[n];
        Random r = new Random(seed);
        r.nextBytes(b);
        return b;
    }

    static void garbage(int i) {
        // Short-lived allocations: young collections all the time.
        Object[] a = new Object[64];
        for (int k = 0; k < a.length; k++) a[k] = new byte[512 + (i + k) % 1024];
        sink = a;
    }

    static void writer(File dir, int id, int rounds) {
        try {
            for (int r = 0; r < rounds; r++) {
                switch ((id + r) % 4) {
                    case 0:
                        try (FileOutputStream o = new FileOutputStream(new File(dir, "fos-" + id + "-" + r))) {
                            for (int k = 0; k < 4; k++) { o.write(block(id * 1000 + r * 10 + k, 4096)); garbage(k); }
                        }
                        break;
                    case 1:
                        try (RandomAccessFile f = new RandomAccessFile(new File(dir, "raf-" + id + "-" + r), "rw")) {
                            for (int k = 3; k >= 0; k--) { f.seek(k * 3000L); f.write(block(id * 1000 + r * 10 + k, 3000)); garbage(k); }
                        }
                        break;
                    case 2:
                        try (FileChannel c = FileChannel.open(new File(dir, "ch-" + id + "-" + r).toPath(),
                                StandardOpenOption.CREATE, StandardOpenOption.WRITE, StandardOpenOption.TRUNCATE_EXISTING)) {
                            for (int k = 0; k < 4; k++) { c.write(ByteBuffer.wrap(block(id * 1000 + r * 10 + k, 5000)), k * 5000L); garbage(k); }
                        }
                        break;
                    default:
                        try (BufferedWriter w = Files.newBufferedWriter(new File(dir, "txt-" + id + "-" + r).toPath())) {
                            for (int k = 0; k < 2000; k++) { w.write("line " + id + " " + r + " " + k + "\n"); if (k % 100 == 0) garbage(k); }
                        }
                }
                if (r >= 2) new File(dir, "fos-" + id + "-" + (r - 2)).delete();
            }
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }

    static Thread start(File dir, int id, int rounds, boolean virtual) throws Exception {
        Runnable task = () -> writer(dir, id, rounds);
        if (virtual) {
            // Thread.ofVirtual().start(task), where the JDK has it (21+).
            Object builder = Thread.class.getMethod("ofVirtual").invoke(null);
            return (Thread) Class.forName("java.lang.Thread$Builder").getMethod("start", Runnable.class).invoke(builder, task);
        }
        Thread t = new Thread(task, "writer-" + id);
        t.start();
        return t;
    }

    public static void main(String[] a) throws Exception {
        File dir = new File(a[0]);
        int threads = Integer.parseInt(a[1]);
        String mode = a[2];
        boolean virtualThreads;
        try { Thread.class.getMethod("ofVirtual"); virtualThreads = true; } catch (NoSuchMethodException e) { virtualThreads = false; }
        List<Thread> ts = new ArrayList<>();
        for (int i = 0; i < threads; i++) ts.add(start(dir, i, mode.equals("exit") ? 1000 : 12, virtualThreads && i % 2 == 1));
        if (mode.equals("exit")) {
            Thread.sleep(150);
            System.exit(0);
        }
        for (Thread t : ts) t.join();
        String[] names = dir.list();
        Arrays.sort(names);
        StringBuilder out = new StringBuilder();
        for (String n : names) {
            CRC32 c = new CRC32();
            c.update(Files.readAllBytes(new File(dir, n).toPath()));
            out.append(n).append(' ').append(Long.toHexString(c.getValue())).append('\n');
        }
        System.out.print(out);
    }
}
