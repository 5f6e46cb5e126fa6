// Prints the node id of the KRaft quorum's leader, the active controller, through Kafka's own Java
// admin client (the Node.js clients' admin APIs do not describe the quorum; a Metadata answer's
// controller id is any broker's under KRaft). Run as a single source file:
// java -cp '<libs>/*' QuorumLeader.java <bootstrap>; prints "leader=<node id>".
import java.util.Properties;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;

public class QuorumLeader {
  public static void main(String[] args) throws Exception {
    Properties properties = new Properties();
    properties.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, args[0]);
    try (Admin admin = Admin.create(properties)) {
      System.out.println("leader=" + admin.describeMetadataQuorum().quorumInfo().get().leaderId());
    }
  }
}
