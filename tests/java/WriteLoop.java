import java.io.*;
import java.nio.ByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.file.*;

/**
 * The shim's cost per Java write (scripts/bench-java.sh): COUNT writes of
 * SIZE bytes to FILE, rewinding every 256 MiB, through
 *   stream:   FileOutputStream.write from a method two calls below main;
 *   channel:  FileChannel.write (NIO) likewise;
 *   buffered: BufferedOutputStream (8 KiB buffer) over FileOutputStream.
 * Prints nothing; exit status 0.
 */
public class WriteLoop {
    static final long WRAP = 256L << 20;

    static void stream(File f, int size, long count) throws IOException {
        byte[] b = new byte[size];
        long written = 0;
        FileOutputStream o = new FileOutputStream(f);
        for (long i = 0; i < count; i++) {
            if (written >= WRAP) { o.getChannel().position(0); written = 0; }
            o.write(b);
            written += size;
        }
        o.close();
    }

    static void channel(File f, int size, long count) throws IOException {
        ByteBuffer b = ByteBuffer.allocateDirect(size);
        try (FileChannel c = FileChannel.open(f.toPath(), StandardOpenOption.CREATE, StandardOpenOption.WRITE)) {
            long pos = 0;
            for (long i = 0; i < count; i++) {
                if (pos >= WRAP) pos = 0;
                b.clear();
                pos += c.write(b, pos);
            }
        }
    }

    static void buffered(File f, int size, long count) throws IOException {
        byte[] b = new byte[size];
        try (OutputStream o = new BufferedOutputStream(new FileOutputStream(f), 8192)) {
            long written = 0;
            for (long i = 0; i < count; i++) {
                o.write(b);
                written += size;
                if (written >= WRAP) { o.flush(); written = 0; }
            }
        }
    }

    static void run(String shape, File f, int size, long count) throws IOException {
        switch (shape) {
            case "stream": stream(f, size, count); break;
            case "channel": channel(f, size, count); break;
            case "buffered": buffered(f, size, count); break;
            default: throw new IllegalArgumentException("unknown shape " + shape + " (stream, channel, buffered)");
        }
    }

    public static void main(String[] a) throws Exception {
        if (a.length != 4) {
            System.err.println("usage: WriteLoop stream|channel|buffered FILE SIZE COUNT");
            System.exit(2);
        }
        run(a[0], new File(a[1]), Integer.parseInt(a[2]), Long.parseLong(a[3]));
    }
}
