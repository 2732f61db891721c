-- What the CDC user needs: read the tables, read the binlog, see the binlog position.
-- The image's entrypoint creates 'cdc'@'%' (MYSQL_USER/MYSQL_PASSWORD) with the server's default plugin, which on
-- MySQL 8.4 is caching_sha2_password (mysql_native_password is off by default): our three connections log in with it
-- over TLS (task.yaml asks ssl-mode=REQUIRED; MySQL generates its certificates at first start).
GRANT SELECT, RELOAD, REPLICATION SLAVE, REPLICATION CLIENT ON *.* TO 'cdc'@'%';
