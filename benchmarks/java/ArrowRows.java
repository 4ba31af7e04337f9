import java.io.ByteArrayInputStream;
import java.lang.management.ManagementFactory;
import java.lang.management.ThreadMXBean;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Arrays;
import java.util.Iterator;
import org.apache.arrow.memory.RootAllocator;
import org.apache.arrow.vector.VectorSchemaRoot;
import org.apache.arrow.vector.ipc.ArrowStreamReader;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.catalyst.expressions.UnsafeProjection;
import org.apache.spark.sql.catalyst.expressions.UnsafeRow;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.sql.vectorized.ArrowColumnVector;
import org.apache.spark.sql.vectorized.ColumnVector;
import org.apache.spark.sql.vectorized.ColumnarBatch;

/**
 * What Spark's JVM does with the Arrow stream a Python data source's worker sends (MapInBatchEvaluatorFactory):
 * each batch's one struct column split into its children, the rows of that ColumnarBatch turned into UnsafeRows by
 * an UnsafeProjection. Args: iterations, then Arrow stream files (struct-wrapped, as the worker writes them), read
 * in turn round after round; prints each file's thread CPU per row over the rounds after the first third (JIT
 * warm-up): the least and the median. Thread CPU, not wall time: the figure moves little with other load.
 */
public class ArrowRows {
  public static void main(String[] args) throws Exception {
    int rounds = Integer.parseInt(args[0]);
    int files = args.length - 1;
    byte[][] data = new byte[files][];
    for (int f = 0; f < files; f++) data[f] = Files.readAllBytes(Path.of(args[f + 1]));
    ThreadMXBean threads = ManagementFactory.getThreadMXBean();
    RootAllocator allocator = new RootAllocator(Long.MAX_VALUE);
    long[][] cpu = new long[files][rounds];
    long[] rows = new long[files];
    long sink = 0;
    for (int round = 0; round < rounds; round++) {
      for (int f = 0; f < files; f++) {
        long start = threads.getCurrentThreadCpuTime();
        rows[f] = 0;
        try (ArrowStreamReader reader = new ArrowStreamReader(new ByteArrayInputStream(data[f]), allocator)) {
          VectorSchemaRoot root = reader.getVectorSchemaRoot();
          UnsafeProjection projection = null;
          while (reader.loadNextBatch()) {
            ArrowColumnVector struct = new ArrowColumnVector(root.getVector(0));
            StructType schema = (StructType) struct.dataType();
            ColumnVector[] columns = new ColumnVector[schema.fields().length];
            for (int i = 0; i < columns.length; i++) columns[i] = struct.getChild(i);
            ColumnarBatch batch = new ColumnarBatch(columns, root.getRowCount());
            if (projection == null) projection = UnsafeProjection.create(schema);
            Iterator<InternalRow> it = batch.rowIterator();
            while (it.hasNext()) {
              UnsafeRow row = projection.apply(it.next());
              sink += row.getSizeInBytes();
              rows[f]++;
            }
          }
        }
        cpu[f][round] = threads.getCurrentThreadCpuTime() - start;
      }
    }
    for (int f = 0; f < files; f++) {
      long[] warm = Arrays.copyOfRange(cpu[f], rounds / 3, rounds);
      Arrays.sort(warm);
      System.out.printf("%s\t%d\t%.0f\t%.0f%n", args[f + 1], rows[f], (double) warm[0] / rows[f],
                        (double) warm[warm.length / 2] / rows[f]);
    }
    if (sink == 42) System.out.println();
  }
}
