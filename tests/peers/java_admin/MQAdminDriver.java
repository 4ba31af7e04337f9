import java.io.BufferedReader;
import java.io.ByteArrayOutputStream;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.lang.reflect.Field;
import java.nio.charset.StandardCharsets;
import java.util.List;

import org.apache.rocketmq.tools.command.MQAdminStartup;

/**
 * Runs mqadmin commands in one JVM (a JVM per command costs 1-2 s): each stdin line is one command, its arguments
 * separated by tabs, run through MQAdminStartup.main0 (which, unlike main, does not exit) with fresh command objects,
 * as a new mqadmin process would have. What the command printed
 * to stdout and stderr is written back as one JSON line {"out": ..., "err": ..., "ms": ...}.
 */
public class MQAdminDriver {
    public static void main(String[] args) throws Exception {
        Field field = MQAdminStartup.class.getDeclaredField("subCommandList");
        field.setAccessible(true);
        List<?> commands = (List<?>) field.get(null);
        PrintStream realOut = System.out;
        PrintStream realErr = System.err;
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        String line;
        while ((line = in.readLine()) != null) {
            if (line.isEmpty()) {
                continue;
            }
            ByteArrayOutputStream out = new ByteArrayOutputStream();
            ByteArrayOutputStream err = new ByteArrayOutputStream();
            System.setOut(new PrintStream(out, true, "UTF-8"));
            System.setErr(new PrintStream(err, true, "UTF-8"));
            long t0 = System.currentTimeMillis();
            try {
                // main0 appends a new instance of every command to this list and runs the first match: some keep
                // their DefaultMQAdminExt across runs (QueryMsgByUniqueKeySubCommand) and would reuse one shut down
                commands.clear();
                MQAdminStartup.main0(line.split("\t"), null);
            } catch (Throwable t) {
                t.printStackTrace();
            } finally {
                System.out.flush();
                System.err.flush();
                System.setOut(realOut);
                System.setErr(realErr);
            }
            long ms = System.currentTimeMillis() - t0;
            realOut.println("{\"out\":" + quote(out.toString("UTF-8")) + ",\"err\":" + quote(err.toString("UTF-8"))
                + ",\"ms\":" + ms + "}");
            realOut.flush();
        }
    }

    static String quote(String s) {
        StringBuilder b = new StringBuilder("\"");
        for (char c : s.toCharArray()) {
            if (c == '"' || c == '\\') {
                b.append('\\').append(c);
            } else if (c < 0x20) {
                b.append(String.format("\\u%04x", (int) c));
            } else {
                b.append(c);
            }
        }
        return b.append('"').toString();
    }
}
