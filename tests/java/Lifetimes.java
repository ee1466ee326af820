import java.io.*;

/**
 * Three methods, three lifetimes, one stream class (tests/tests/java_paths.rs):
 * every round, journal() rewrites DIR/journal (its pages die next round),
 * table() writes a new DIR/table-N that is never deleted, and scratch()
 * writes DIR/scratch-N and deletes the scratch file of four rounds before.
 * All three write 4 KiB blocks through FileOutputStream.write.
 */
public class Lifetimes {
    static final byte[] BLOCK = new byte[4096];

    static void journal(File dir) throws IOException {
        try (FileOutputStream o = new FileOutputStream(new File(dir, "journal"))) {
            for (int i = 0; i < 8; i++) o.write(BLOCK);
        }
    }

    static void table(File dir, int round) throws IOException {
        try (FileOutputStream o = new FileOutputStream(new File(dir, "table-" + round))) {
            for (int i = 0; i < 16; i++) o.write(BLOCK);
        }
    }

    static void scratch(File dir, int round) throws IOException {
        try (FileOutputStream o = new FileOutputStream(new File(dir, "scratch-" + round))) {
            for (int i = 0; i < 16; i++) o.write(BLOCK);
        }
        new File(dir, "scratch-" + (round - 4)).delete();
    }

    public static void main(String[] a) throws Exception {
        File dir = new File(a[0]);
        int rounds = Integer.parseInt(a[1]);
        for (int r = 0; r < rounds; r++) {
            journal(dir);
            table(dir, r);
            scratch(dir, r);
        }
        System.out.println("rounds " + rounds);
    }
}
