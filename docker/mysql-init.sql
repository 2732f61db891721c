-- What the CDC user needs: read the tables, read the binlog, see the binlog position.
GRANT SELECT, RELOAD, REPLICATION SLAVE, REPLICATION CLIENT ON *.* TO 'cdc'@'%';
