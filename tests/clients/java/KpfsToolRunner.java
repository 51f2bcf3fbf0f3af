// Runs several of Kafka's command-line tools in one JVM, as their scripts would one by
// one (tests/shell/t_kafka_txn_diff.sh: a JVM's start is most of what a tool costs, and
// that test runs dozens). Each line of standard input is one run, tab-separated:
//   NAME  CLASS  ARG...
// e.g. "end-list  org.apache.kafka.tools.TransactionsCommand  --bootstrap-server  H:P  list"
// (the class bin/kafka-transactions.sh runs). What the tool prints on standard output,
// then what it prints on standard error, then "exit N" (its Exit.exit status, 0 when its
// main returns) go to OUT_DIR/NAME.raw:
//   KpfsToolRunner OUT_DIR < RUNS
// Tools end through org.apache.kafka.common.utils.Exit, which lets a caller replace
// System.exit: here it ends the one run.

import java.io.ByteArrayOutputStream;
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.lang.reflect.InvocationTargetException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Arrays;
import org.apache.kafka.common.utils.Exit;

public final class KpfsToolRunner {
    private static final class ToolExit extends RuntimeException {
        private static final long serialVersionUID = 1L;
        final int status;

        ToolExit(int status) {
            super(null, null, false, false);
            this.status = status;
        }
    }

    public static void main(String[] args) throws Exception {
        Path out = Path.of(args[0]);
        Exit.setExitProcedure((status, message) -> {
            throw new ToolExit(status);
        });
        Exit.setHaltProcedure((status, message) -> {
            throw new ToolExit(status);
        });
        PrintStream realOut = System.out;
        PrintStream realErr = System.err;
        BufferedReader runs = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        for (String line = runs.readLine(); line != null; line = runs.readLine()) {
            if (line.isEmpty()) {
                continue;
            }
            String[] fields = line.split("\t");
            ByteArrayOutputStream stdout = new ByteArrayOutputStream();
            ByteArrayOutputStream stderr = new ByteArrayOutputStream();
            int status = 0;
            System.setOut(new PrintStream(stdout, true, StandardCharsets.UTF_8));
            System.setErr(new PrintStream(stderr, true, StandardCharsets.UTF_8));
            try {
                Class.forName(fields[1]).getMethod("main", String[].class)
                        .invoke(null, (Object) Arrays.copyOfRange(fields, 2, fields.length));
            } catch (InvocationTargetException e) {
                if (e.getCause() instanceof ToolExit exit) {
                    status = exit.status;
                } else {
                    e.getCause().printStackTrace();
                    status = 1;
                }
            } finally {
                System.out.flush();
                System.err.flush();
                System.setOut(realOut);
                System.setErr(realErr);
            }
            String text = stdout.toString(StandardCharsets.UTF_8) + stderr.toString(StandardCharsets.UTF_8)
                    + "exit " + status + "\n";
            Files.writeString(out.resolve(fields[0] + ".raw"), text);
        }
    }
}
