import java.io.*;

/**
 * Three methods, three lifetimes, one stream class (tests/tests/java_paths.rs):
 * every round, journal() rewrites DIR/journal (its pages die next round),
 * table() writes a new DIR/table-N that is never deleted, and scratch()
 * writes DIR/scratch-N and deletes the scratch file of four rounds before.
 * All three write 4 KiB blocks through one helper, fill(), that calls
 * FileOutputStream.write: their paths share their innermost Java frames
 * and differ in the next one. ROUNDS in the thousands make the JIT
 * compile fill() and the methods (and inline them into each other).
 */
public class Lifetimes {
    static final byte[] BLOCK = new byte[4096];

    static void fill(FileOutputStream o, int blocks) throws IOException {
        for (int i = 0; i < blocks; i++) o.write(BLOCK);
    }

    static void journal(File dir) throws IOException {
        try (FileOutputStream o = new FileOutputStream(new File(dir, "journal"))) {
            fill(o, 2);
        }
    }

    static void table(File dir, int round) throws IOException {
        try (FileOutputStream o = new FileOutputStream(new File(dir, "table-" + round))) {
            fill(o, 4);
        }
    }

    static void scratch(File dir, int round) throws IOException {
        try (FileOutputStream o = new FileOutputStream(new File(dir, "scratch-" + round))) {
            fill(o, 4);
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
