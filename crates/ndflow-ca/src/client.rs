pub struct Client;
pub struct ClientConfig;
pub struct ClientError;
pub struct Reading;
pub struct Subscription;
