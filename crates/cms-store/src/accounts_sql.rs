//! [`Accounts`] on the SQL store.

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use cms_model::UserRole;
use sea_orm::sea_query::{Expr, ExprTrait};
use sea_orm::{
    ActiveValue::Set, ColumnTrait, ConnectionTrait, EntityTrait, PaginatorTrait, QueryFilter, QueryOrder,
    SqlErr, TransactionTrait,
};

use crate::accounts::{Accounts, GrantRecord, TokenRecord, UserChange, UserRecord};
use crate::accounts_grants as grants;
use crate::entity::{api_token, setting, user};
use crate::error::StoreError;
use crate::render::format_time;
use crate::sql::SqlStore;

fn to_user(row: user::Model) -> Result<UserRecord, StoreError> {
    Ok(UserRecord {
        role: UserRole::from_global_name(&row.role)
            .ok_or_else(|| StoreError::Corrupt(format!("unknown role {:?}", row.role)))?,
        password_hash: row.password_hash,
        resource_version: row.resource_version as u64,
        created_at: time(&row.created_at)?,
        updated_at: time(&row.updated_at)?,
        name: row.name,
    })
}

fn to_token(row: api_token::Model) -> Result<TokenRecord, StoreError> {
    Ok(TokenRecord {
        expires_at: time(&row.expires_at)?,
        created_at: time(&row.created_at)?,
        last_used_at: row.last_used_at.as_deref().map(time).transpose()?,
        id: row.id,
        user: row.user_name,
        name: row.name,
        secret_hash: row.secret_hash,
    })
}

pub(crate) fn time(text: &str) -> Result<DateTime<Utc>, StoreError> {
    DateTime::parse_from_rfc3339(text)
        .map(|t| t.with_timezone(&Utc))
        .map_err(|err| StoreError::Corrupt(err.to_string()))
}

fn user_row(record: &UserRecord) -> user::ActiveModel {
    user::ActiveModel {
        name: Set(record.name.clone()),
        role: Set(UserRole::global_name(record.role).to_string()),
        password_hash: Set(record.password_hash.clone()),
        resource_version: Set(1),
        created_at: Set(format_time(record.created_at)),
        updated_at: Set(format_time(record.updated_at)),
    }
}

pub(crate) fn duplicate(err: &sea_orm::DbErr) -> bool {
    matches!(err.sql_err(), Some(SqlErr::UniqueConstraintViolation(_)))
}

async fn admins(db: &impl ConnectionTrait) -> Result<u64, StoreError> {
    Ok(user::Entity::find().filter(user::Column::Role.eq(UserRole::Admin.as_str())).count(db).await?)
}

async fn find_user(db: &impl ConnectionTrait, name: &str) -> Result<user::Model, StoreError> {
    user::Entity::find_by_id(name.to_string())
        .one(db)
        .await?
        .ok_or_else(|| StoreError::NotFound(format!("user {name:?}")))
}

fn last_admin() -> StoreError {
    StoreError::Refused("the last admin cannot be deleted or demoted".into())
}

#[async_trait]
impl Accounts for SqlStore {
    async fn user(&self, name: String) -> Result<Option<UserRecord>, StoreError> {
        user::Entity::find_by_id(name).one(&self.db).await?.map(to_user).transpose()
    }

    async fn users(&self) -> Result<Vec<UserRecord>, StoreError> {
        let rows = user::Entity::find().order_by_asc(user::Column::Name).all(&self.db).await?;
        rows.into_iter().map(to_user).collect()
    }

    async fn create_user(&self, record: UserRecord) -> Result<UserRecord, StoreError> {
        let _guard = self.write_lock.lock().await;
        match user::Entity::insert(user_row(&record)).exec_without_returning(&self.db).await {
            Ok(_) => Ok(UserRecord { resource_version: 1, ..record }),
            Err(err) if duplicate(&err) => Err(StoreError::AlreadyExists(format!("user {:?}", record.name))),
            Err(err) => Err(err.into()),
        }
    }

    async fn create_first_user(&self, record: UserRecord) -> Result<bool, StoreError> {
        let _guard = self.write_lock.lock().await;
        let txn = self.db.begin().await?;
        if user::Entity::find().count(&txn).await? > 0 {
            return Ok(false);
        }
        match user::Entity::insert(user_row(&record)).exec_without_returning(&txn).await {
            Ok(_) => {}
            // Another replica created the first user at the same moment.
            Err(err) if duplicate(&err) => return Ok(false),
            Err(err) => return Err(err.into()),
        }
        txn.commit().await?;
        Ok(true)
    }

    async fn update_user(
        &self,
        name: String,
        change: UserChange,
        expected: Option<u64>,
    ) -> Result<UserRecord, StoreError> {
        let _guard = self.write_lock.lock().await;
        let txn = self.db.begin().await?;
        let row = find_user(&txn, &name).await?;
        let current = row.resource_version as u64;
        let expected = expected.unwrap_or(current);
        let demoting =
            row.role == UserRole::Admin.as_str() && change.role.is_some_and(|r| r != Some(UserRole::Admin));
        if demoting && admins(&txn).await? <= 1 {
            return Err(last_admin());
        }
        let mut update = user::Entity::update_many()
            .col_expr(user::Column::ResourceVersion, Expr::col(user::Column::ResourceVersion).add(1))
            .col_expr(user::Column::UpdatedAt, Expr::value(format_time(Utc::now())));
        if let Some(role) = change.role {
            update = update.col_expr(user::Column::Role, Expr::value(UserRole::global_name(role)));
        }
        if let Some(hash) = change.password_hash {
            update = update.col_expr(user::Column::PasswordHash, Expr::value(hash));
        }
        let result = update
            .filter(user::Column::Name.eq(name.as_str()))
            .filter(user::Column::ResourceVersion.eq(expected as i64))
            .exec(&txn)
            .await?;
        if result.rows_affected != 1 {
            return Err(StoreError::Conflict { what: format!("user {name:?}"), expected, current });
        }
        let updated = to_user(find_user(&txn, &name).await?)?;
        txn.commit().await?;
        Ok(updated)
    }

    async fn delete_user(&self, name: String) -> Result<(), StoreError> {
        let _guard = self.write_lock.lock().await;
        let txn = self.db.begin().await?;
        let row = find_user(&txn, &name).await?;
        if row.role == UserRole::Admin.as_str() && admins(&txn).await? <= 1 {
            return Err(last_admin());
        }
        api_token::Entity::delete_many()
            .filter(api_token::Column::UserName.eq(name.as_str()))
            .exec(&txn)
            .await?;
        user::Entity::delete_by_id(name).exec(&txn).await?;
        txn.commit().await?;
        Ok(())
    }

    async fn create_token(&self, token: TokenRecord) -> Result<TokenRecord, StoreError> {
        let _guard = self.write_lock.lock().await;
        let txn = self.db.begin().await?;
        find_user(&txn, &token.user).await?;
        let row = api_token::ActiveModel {
            id: Set(token.id.clone()),
            user_name: Set(token.user.clone()),
            name: Set(token.name.clone()),
            secret_hash: Set(token.secret_hash.clone()),
            expires_at: Set(format_time(token.expires_at)),
            created_at: Set(format_time(token.created_at)),
            last_used_at: Set(None),
        };
        match api_token::Entity::insert(row).exec_without_returning(&txn).await {
            Ok(_) => {}
            Err(err) if duplicate(&err) => {
                return Err(StoreError::AlreadyExists(format!(
                    "token {:?} of user {:?}",
                    token.name, token.user
                )));
            }
            Err(err) => return Err(err.into()),
        }
        txn.commit().await?;
        Ok(token)
    }

    async fn tokens(&self, user: String) -> Result<Vec<TokenRecord>, StoreError> {
        let rows = api_token::Entity::find()
            .filter(api_token::Column::UserName.eq(user))
            .order_by_asc(api_token::Column::Name)
            .all(&self.db)
            .await?;
        rows.into_iter().map(to_token).collect()
    }

    async fn token(&self, id: String) -> Result<Option<TokenRecord>, StoreError> {
        api_token::Entity::find_by_id(id).one(&self.db).await?.map(to_token).transpose()
    }

    async fn delete_token(&self, user: String, name: String) -> Result<(), StoreError> {
        let _guard = self.write_lock.lock().await;
        let result = api_token::Entity::delete_many()
            .filter(api_token::Column::UserName.eq(user.as_str()))
            .filter(api_token::Column::Name.eq(name.as_str()))
            .exec(&self.db)
            .await?;
        if result.rows_affected == 0 {
            return Err(StoreError::NotFound(format!("token {name:?} of user {user:?}")));
        }
        Ok(())
    }

    async fn touch_token(&self, id: String, at: DateTime<Utc>) -> Result<(), StoreError> {
        // Every write of this replica takes the write lock: on SQLite a
        // write between another transaction's read and its write would
        // make that transaction fail (a stale snapshot), not wait.
        let _guard = self.write_lock.lock().await;
        api_token::Entity::update_many()
            .col_expr(api_token::Column::LastUsedAt, Expr::value(format_time(at)))
            .filter(api_token::Column::Id.eq(id))
            .exec(&self.db)
            .await?;
        Ok(())
    }

    async fn grants(&self) -> Result<Vec<GrantRecord>, StoreError> {
        grants::all(&self.db).await
    }

    async fn grant(&self, name: String) -> Result<Option<GrantRecord>, StoreError> {
        grants::one(&self.db, &name).await
    }

    async fn create_grant(&self, grant: GrantRecord) -> Result<GrantRecord, StoreError> {
        let _guard = self.write_lock.lock().await;
        grants::create(&self.db, grant).await
    }

    async fn update_grant(
        &self,
        name: String,
        spec: cms_model::GrantSpec,
        expected: u64,
    ) -> Result<GrantRecord, StoreError> {
        let _guard = self.write_lock.lock().await;
        let txn = self.db.begin().await?;
        let updated = grants::update(&txn, &name, &spec, expected).await?;
        txn.commit().await?;
        Ok(updated)
    }

    async fn delete_grant(&self, name: String) -> Result<(), StoreError> {
        let _guard = self.write_lock.lock().await;
        grants::delete(&self.db, &name).await
    }

    async fn setting_or_insert(&self, name: String, value: String) -> Result<String, StoreError> {
        let _guard = self.write_lock.lock().await;
        let row = setting::ActiveModel { name: Set(name.clone()), value: Set(value) };
        match setting::Entity::insert(row).exec_without_returning(&self.db).await {
            Ok(_) => {}
            Err(err) if duplicate(&err) => {}
            Err(err) => return Err(err.into()),
        }
        let stored = setting::Entity::find_by_id(name.clone()).one(&self.db).await?;
        stored.map(|row| row.value).ok_or_else(|| StoreError::Corrupt(format!("setting {name:?} vanished")))
    }
}
